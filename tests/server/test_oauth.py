"""codemode serve as an OAuth 2.1 resource server: JWTs checked against a real JWKS.

A real HTTP server (in a thread) publishes the issuer's JWKS; tokens are signed with real
keys by PyJWT; ``codemode serve --tenants`` runs as its own process.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from .conftest import INITIALIZE, HttpServer, http_client, start_http_server

pytestmark = pytest.mark.anyio

ISSUER = "https://auth.example.test"
STATIC = "static-token-" + "s" * 32


@dataclass
class Issuer:
    key: rsa.RSAPrivateKey
    jwks_uri: str

    def token(self, *, alg: str = "RS256", key: Any = None, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "exp": now + 300, "iat": now, "tenant": "acme", **claims}
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, key or self.key, algorithm=alg, headers={"kid": "k1"})


class JWKSEndpoint:
    """The issuer's JWKS endpoint, that can go down (answering 503 after ``delay`` s, as a
    struggling one does); counts the fetches it gets."""

    def __init__(self, jwks: bytes, *, down: bool = False) -> None:
        self.down, self.delay, self.fetches = down, 1.0, 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.fetches += 1
                if outer.down:
                    time.sleep(outer.delay)
                    self.send_error(503)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(jwks)))
                self.end_headers()
                self.wfile.write(jwks)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.httpd.server_address[1]}/jwks.json"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    endpoint = JWKSEndpoint(
        json.dumps({"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]}).encode()
    )
    try:
        yield Issuer(key, endpoint.uri)
    finally:
        endpoint.close()


@dataclass
class Served:
    server: HttpServer
    resource: str


@pytest.fixture(scope="module")
def served(issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("oauth")
    tenants: dict[str, Any] = {}
    for name in ("acme", "globex"):
        (root / name).mkdir()
        (root / name / "mcp.json").write_text('{"mcpServers": {}}')
        tenants[name] = {"workspace": str(root / name)}
    tenants["globex"]["token_env"] = "GLOBEX_TOKEN"  # static tokens and OAuth side by side
    resource = "https://mcp.example.test/mcp"
    oauth = {"issuer": ISSUER, "jwks_uri": issuer.jwks_uri, "resource": resource}
    (root / "tenants.json").write_text(json.dumps({"tenants": tenants, "oauth": oauth}))
    server = start_http_server(
        None, "--tenants", str(root / "tenants.json"), token=None, env={"GLOBEX_TOKEN": STATIC}
    )
    try:
        yield Served(server, resource)
    finally:
        server.stop()


def post(served: Served, token: str | None) -> httpx2.Response:
    headers = {"Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx2.post(served.server.url, json=INITIALIZE, headers=headers, timeout=30)


async def test_a_valid_jwt_lets_the_official_client_in_as_the_tenant_its_claim_names(
    issuer: Issuer, served: Served
) -> None:
    token = issuer.token(aud=served.resource)
    async with http_client(served.server.url, token=token) as acme:
        await acme.call_tool("run_code", {"code": "state.set('who', 'acme via oauth')"})
        mine = await acme.call_tool("get_state", {})
    async with http_client(served.server.url, token=STATIC) as globex:
        theirs = await globex.call_tool("get_state", {})
    assert "acme via oauth" in str(mine.content)
    assert "acme via oauth" not in str(theirs.content)


def test_the_protected_resource_metadata_names_the_resource_and_its_issuer(
    served: Served,
) -> None:
    base = served.server.url.removesuffix("/mcp")
    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ):
        meta = httpx2.get(base + path, timeout=10)
        assert meta.status_code == 200
        assert meta.json()["resource"] == served.resource
        assert meta.json()["authorization_servers"] == [ISSUER]
    without = post(served, None)
    assert without.status_code == 401
    challenge = without.headers["www-authenticate"]
    assert (
        'resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp"'
        in challenge
    )
    assert "error=" not in challenge  # no token sent: no error code (RFC 6750 3.1)


def _hs256(claims: dict[str, Any], secret: bytes) -> str:
    """The key-confusion attack: HMAC keyed with the issuer's public key (PyJWT refuses to
    make one, so it is made by hand)."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    body = b64(json.dumps(claims).encode())
    mac = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(mac)}"


def _refusals(issuer: Issuer, resource: str) -> dict[str, tuple[str, str]]:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = issuer.key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    now = int(time.time())
    unsigned = jwt.encode(
        {"iss": ISSUER, "aud": resource, "exp": now + 300, "tenant": "acme"},
        "",  # no key: algorithm "none" signs nothing
        algorithm="none",
        headers={"kid": "k1"},
    )
    return {
        "another audience": (issuer.token(aud="https://other.example.test/mcp"), "audience"),
        "no audience": (issuer.token(), "'aud'"),
        "no expiry": (issuer.token(aud=resource, exp=None), "'exp'"),
        "expired": (issuer.token(aud=resource, exp=now - 3600), "expired"),
        "another issuer": (issuer.token(aud=resource, iss="https://evil.test"), "issuer"),
        "another algorithm": (issuer.token(aud=resource, alg="RS512"), "RS256 only"),
        "HS256 keyed with the public key": (
            _hs256(
                {"iss": ISSUER, "aud": resource, "exp": now + 300, "tenant": "acme"}, public_pem
            ),
            "RS256 only",
        ),
        "alg none": (unsigned, "RS256 only"),
        "another key": (issuer.token(aud=resource, key=other), "Signature verification"),
        "an unknown tenant": (issuer.token(aud=resource, tenant="initech"), "no tenant"),
        "no tenant": (issuer.token(aud=resource, tenant=None), "no tenant"),
        "not a JWT": ("x" * 40, "not valid"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "another audience",
        "no audience",
        "no expiry",
        "expired",
        "another issuer",
        "another algorithm",
        "HS256 keyed with the public key",
        "alg none",
        "another key",
        "an unknown tenant",
        "no tenant",
        "not a JWT",
    ],
)
def test_a_jwt_that_fails_a_check_is_refused_with_invalid_token_and_the_reason(
    issuer: Issuer, served: Served, case: str
) -> None:
    token, reason = _refusals(issuer, served.resource)[case]
    refused = post(served, token)
    assert refused.status_code == 401, refused.text
    challenge = refused.headers["www-authenticate"]
    assert 'error="invalid_token"' in challenge and "resource_metadata=" in challenge
    assert reason in refused.json()["error_description"]
    assert token not in "".join(served.server.lines)


def test_the_right_jwt_passes_the_same_checks(issuer: Issuer, served: Served) -> None:
    """The control for the refusals above: only the broken part made them fail."""
    assert post(served, issuer.token(aud=served.resource)).status_code == 200
    assert post(served, STATIC).status_code == 200


def test_an_oauth_config_with_a_symmetric_algorithm_is_refused(tmp_path: Path) -> None:
    from codemode.errors import ConfigError
    from codemode.tenants.config import load_tenants

    oauth = {
        "issuer": ISSUER,
        "jwks_uri": ISSUER + "/jwks",
        "resource": ISSUER,
        "algorithm": "HS256",
    }
    path = tmp_path / "tenants.json"
    path.write_text(json.dumps({"tenants": {"a": {"workspace": str(tmp_path)}}, "oauth": oauth}))
    with pytest.raises(ConfigError, match=r"oauth\.algorithm"):
        load_tenants(path, env={})


def test_a_flood_of_tokens_with_unknown_key_ids_costs_one_jwks_fetch_per_retry_period(
    issuer: Issuer, tmp_path: Path
) -> None:
    """While the JWKS endpoint is down, each token with a key id not cached used to start a
    fetch (up to 10 s, one at a time): bogus tokens could stall every OAuth request."""
    from concurrent.futures import ThreadPoolExecutor

    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(issuer.key.public_key()))
    jwks = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig"}]}).encode()
    endpoint = JWKSEndpoint(jwks, down=True)
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "mcp.json").write_text('{"mcpServers": {}}')
    resource = "https://mcp.example.test/mcp"
    oauth = {"issuer": ISSUER, "jwks_uri": endpoint.uri, "resource": resource, "jwks_retry": 3}
    tenants = {"acme": {"workspace": str(tmp_path / "acme"), "token_env": "ACME_TOKEN"}}
    (tmp_path / "tenants.json").write_text(json.dumps({"tenants": tenants, "oauth": oauth}))
    server = start_http_server(
        None, "--tenants", str(tmp_path / "tenants.json"), token=None, env={"ACME_TOKEN": STATIC}
    )
    served = Served(server, resource)
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": resource, "exp": now + 300, "tenant": "acme"}
    bogus = [
        jwt.encode(claims, issuer.key, algorithm="RS256", headers={"kid": f"bogus{i}"})
        for i in range(8)
    ]
    valid = issuer.token(aud=resource)
    try:
        with ThreadPoolExecutor(len(bogus) + 2) as pool:
            answers = list(pool.map(lambda t: post(served, t), [*bogus, valid, STATIC]))
        *refused, during, static = answers
        assert [r.status_code for r in refused] == [401] * len(bogus)
        assert during.status_code == 401  # no key to check it with yet: refused, not stalled
        assert "cannot be checked now" in during.json()["error_description"]
        assert static.status_code == 200  # static tokens never wait for the issuer
        assert endpoint.fetches == 1
        endpoint.down = False
        deadline = time.monotonic() + 30  # the retry period (3 s) passes
        while post(served, valid).status_code != 200:
            assert time.monotonic() < deadline, "the JWKS was never fetched again"
            time.sleep(0.2)
        fetched = endpoint.fetches
        with ThreadPoolExecutor(len(bogus)) as pool:
            refused = list(pool.map(lambda t: post(served, t), bogus))
        assert {r.status_code for r in refused} == {401}
        assert "no key of the issuer's JWKS signs it" in refused[0].json()["error_description"]
        assert endpoint.fetches == fetched  # the fresh set lacks them: no refetch per token
        assert post(served, valid).status_code == 200
    finally:
        server.stop()
        endpoint.close()
