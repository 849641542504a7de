"""HTTP tools from YAML against a real local HTTP server, and the ways out they refuse."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from codemode.tools.declared import load_file
from codemode.tools.declared.netguard import AddressPolicy, GuardedBackend

from .conftest import open_session, write_tools

pytestmark = pytest.mark.anyio


@dataclass
class Recorder:
    """A real HTTP server on loopback that records every request it gets."""

    server: ThreadingHTTPServer
    requests: list[dict[str, Any]] = field(default_factory=list)
    redirect_to: str = ""

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def paths(self) -> list[str]:
        return [r["path"] for r in self.requests]


def start_recorder(host: str = "127.0.0.1") -> Recorder:
    rec: Recorder

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            rec.requests.append(
                {"method": self.command, "path": self.path, "headers": dict(self.headers),
                 "body": body.decode()}
            )  # fmt: skip
            if self.path.startswith("/v1/redirect-same"):
                self._send(302, b"", location="/v1/items/moved")
            elif self.path.startswith("/v1/redirect-away"):
                self._send(302, b"", location=rec.redirect_to)
            elif self.path.startswith("/v1/text"):
                self._send(200, b"42", ctype="text/plain")
            elif self.path.startswith("/v1/fail"):
                self._send(503, b"try later", ctype="text/plain")
            else:
                data = {"method": self.command, "path": self.path, "body": body.decode() or None,
                        "auth": self.headers.get("Authorization"),
                        "shop": self.headers.get("X-Shop")}  # fmt: skip
                self._send(200, json.dumps(data).encode())

        def _send(
            self, code: int, body: bytes, *, ctype: str = "application/json", location: str = ""
        ) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            if location:
                self.send_header("Location", location)
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _answer

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    rec = Recorder(Server((host, 0), Handler))
    threading.Thread(target=rec.server.serve_forever, daemon=True).start()
    return rec


@pytest.fixture
def api() -> Iterator[Recorder]:
    rec = start_recorder()
    yield rec
    stop(rec)


def stop(rec: Recorder) -> None:
    rec.server.shutdown()
    rec.server.server_close()


@pytest.fixture
def elsewhere() -> Iterator[Recorder]:
    rec = start_recorder()
    yield rec
    stop(rec)


def definition(base_url: str, allow: list[str] | None = None) -> str:
    allow_line = f"  allow_networks: {json.dumps(allow)}\n" if allow is not None else ""
    return f"""
name: shop
description: The shop's API
http:
  base_url: {base_url}
  headers: {{Authorization: "Bearer ${{SHOP_TOKEN}}"}}
{allow_line}tools:
  - name: get_item
    description: Fetch one item of the shop by id.
    method: GET
    path: /items/{{item_id}}
    query: {{fields: "{{fields}}", tag: "{{tags}}"}}
    parameters:
      item_id: {{type: string}}
      fields: {{type: string, required: false}}
      tags: {{type: array, items: {{type: string}}, required: false}}
    annotations: {{read_only: true, destructive: false}}
  - name: create_order
    description: Place an order.
    method: POST
    path: /orders
    body: {{sku: "{{sku}}", qty: "{{qty}}", note: "qty={{qty}}", gift: "{{gift}}"}}
    parameters:
      sku: {{type: string}}
      qty: {{type: integer}}
      gift: {{type: boolean, required: false}}
  - name: text
    path: /text
  - name: fail
    path: /fail
  - name: hop
    path: /redirect-same
  - name: escape
    path: /redirect-away
"""


async def test_an_http_tool_sends_typed_requests_with_host_side_secrets(
    tmp_path: Path, api: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_TOKEN", "s3cret-token")
    base = f"http://127.0.0.1:{api.port}/v1"
    write_tools(tmp_path, "shop.yaml", definition(base, ["127.0.0.1/32"]))
    async with open_session(tmp_path) as s:
        r = await s.run("tools.shop.get_item(item_id='a b', fields='name', tags=['x', 'y'])")
        assert r.is_ok, r.error
        assert r.value["path"] == "/v1/items/a%20b?fields=name&tag=x&tag=y"
        assert r.value["auth"] == "Bearer s3cret-token"
        r = await s.run("tools.shop.create_order(sku='A-1', qty=3)")
        assert json.loads(r.value["body"]) == {"sku": "A-1", "qty": 3, "note": "qty=3"}
        r = await s.run("tools.shop.text()")
        assert r.value == "42"  # text stays text
        r = await s.run("tools.shop.fail()")
        assert not r.is_ok and r.error is not None and "HTTP 503: try later" in r.error.message
        r = await s.run("tools.shop.hop()")
        assert r.value["path"] == "/v1/items/moved"  # same origin: followed
        # the secret stays on the host: not in the description, not in the sandbox's env
        r = await s.run("import os\nstr(tools.describe('shop.get_item')) + str(dict(os.environ))")
        assert "s3cret" not in r.value


async def test_parameters_cannot_leave_their_path_segment(
    tmp_path: Path, api: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_TOKEN", "t")
    base = f"http://127.0.0.1:{api.port}/v1"
    write_tools(tmp_path, "shop.yaml", definition(base, ["127.0.0.1/32"]))
    async with open_session(tmp_path) as s:
        r = await s.run("tools.shop.get_item(item_id='../../admin?x=1#f')")
        assert r.value["path"] == "/v1/items/..%2F..%2Fadmin%3Fx%3D1%23f"
        r = await s.run("tools.shop.get_item(item_id='..')")
        assert (
            not r.is_ok and r.error is not None and "not allowed in a URL path" in r.error.message
        )
        r = await s.run("tools.shop.get_item(item_id='@evil.example:80')")
        assert r.value["path"] == "/v1/items/%40evil.example%3A80"
    assert all(p.startswith("/v1/items/") for p in api.paths())


async def test_loopback_is_refused_unless_allow_listed(
    tmp_path: Path, api: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_TOKEN", "t")
    for host in ("127.0.0.1", "localhost", "127.1", "[::ffff:127.0.0.1]"):
        write_tools(tmp_path, "shop.yaml", definition(f"http://{host}:{api.port}/v1"))
        async with open_session(tmp_path) as s:
            r = await s.run("tools.shop.get_item(item_id='x')")
            assert not r.is_ok and r.error is not None, host
            assert "refused to connect" in r.error.message and "not a public address" in (
                r.error.message
            ), r.error.message
    assert api.requests == []  # not one request reached the server


async def test_ipv6_loopback_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_TOKEN", "t")
    try:
        rec = start_recorder("::1")
    except OSError:
        pytest.skip("no IPv6 loopback here")
    try:
        write_tools(tmp_path, "shop.yaml", definition(f"http://[::1]:{rec.port}/v1"))
        async with open_session(tmp_path) as s:
            r = await s.run("tools.shop.get_item(item_id='x')")
            assert (
                not r.is_ok
                and r.error is not None
                and "::1 is not a public address" in r.error.message
            )
        assert rec.requests == []
        write_tools(tmp_path, "shop.yaml", definition(f"http://[::1]:{rec.port}/v1", ["::1/128"]))
        async with open_session(tmp_path) as s:
            r = await s.run("tools.shop.get_item(item_id='x')")
            assert r.is_ok and r.value["path"] == "/v1/items/x"
    finally:
        stop(rec)


async def test_a_redirect_to_another_origin_is_refused(
    tmp_path: Path, api: Recorder, elsewhere: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_TOKEN", "t")
    api.redirect_to = f"http://127.0.0.1:{elsewhere.port}/steal"
    base = f"http://127.0.0.1:{api.port}/v1"
    write_tools(tmp_path, "shop.yaml", definition(base, ["127.0.0.0/8"]))
    async with open_session(tmp_path) as s:
        r = await s.run("tools.shop.escape()")
        assert (
            not r.is_ok and r.error is not None and "is not this tool's origin" in r.error.message
        )
        api.redirect_to = "http://169.254.169.254/latest/meta-data/"
        r = await s.run("tools.shop.escape()")
        assert (
            not r.is_ok and r.error is not None and "is not this tool's origin" in r.error.message
        )
    assert elsewhere.requests == []


@pytest.mark.parametrize(
    ("address", "allow", "refused"),
    [
        ("127.0.0.1", [], True),
        ("::1", [], True),
        ("10.1.2.3", [], True),
        ("172.16.0.9", [], True),
        ("192.168.1.1", [], True),
        ("100.64.0.1", [], True),  # shared address space (CGNAT)
        ("169.254.169.254", [], True),
        ("169.254.169.254", ["169.254.0.0/16"], True),  # metadata only when named itself
        ("169.254.169.254", ["169.254.169.254/32"], False),
        ("fd00:ec2::254", ["fc00::/7"], True),
        ("::ffff:10.0.0.1", [], True),  # IPv4-mapped
        ("2002:7f00:1::", [], True),  # 6to4 wrapping 127.0.0.1
        ("64:ff9b::a00:1", [], True),  # NAT64 of 10.0.0.1
        ("0.0.0.0", [], True),
        ("224.0.0.1", [], True),
        ("10.1.2.3", ["10.0.0.0/8"], False),
        ("93.184.216.34", [], False),
        ("2606:4700::1111", [], False),
    ],
)
def test_the_address_policy(address: str, allow: list[str], refused: bool) -> None:
    assert (AddressPolicy(allow).why_refused(address) is not None) is refused


async def test_every_connection_checks_the_addresses_it_connects_to(api: Recorder) -> None:
    """DNS rebinding: the name is resolved, checked and connected in one step, each time."""
    answers = iter([["127.0.0.1"], ["93.184.216.34", "127.0.0.1"]])

    async def rebinding(host: str, port: int) -> list[str]:
        return next(answers)

    backend = GuardedBackend(AddressPolicy(["127.0.0.1/32"]))
    backend._resolve = rebinding
    stream = await backend.connect_tcp("rebind.test", api.port)
    await stream.aclose()
    strict = GuardedBackend(AddressPolicy())
    strict._resolve = rebinding
    with pytest.raises(Exception, match="not a public address"):
        await strict.connect_tcp("rebind.test", api.port)


async def test_a_definition_cannot_template_the_origin(tmp_path: Path) -> None:
    path = write_tools(
        tmp_path, "bad.yaml", definition("http://{host}:80/v1").replace("{host}", "{{host}}")
    )
    with pytest.raises(Exception, match="base_url is fixed"):
        load_file(path, files_dir=tmp_path, sandbox=lambda: None)


@pytest.mark.parametrize(
    "header",
    [
        'X-Shop: "${SHOP_CREDS}"',  # a name that does not look secret, from the host
        'Authorization: "Key zq8-literal-99xy"',  # a literal under a secret-looking name
    ],
)
async def test_a_secret_given_to_an_http_tool_never_reaches_the_code_with_privacy_on(
    tmp_path: Path, api: Recorder, monkeypatch: pytest.MonkeyPatch, header: str
) -> None:
    """As for mcp.json: every ``${VAR}`` a definition expands, and every value under a
    secret-looking header or env name, is redacted wherever it comes back (an API that
    echoes its credentials in an answer or an error)."""
    from codemode.privacy import layers

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SHOP_CREDS", "zq8-from-env-77ab")
    layers.reset_engines()
    (tmp_path / "config.json").write_text('{"privacy": true}')
    text = f"""
        name: echo
        http:
          base_url: http://127.0.0.1:{api.port}/v1
          headers: {{{header}}}
          allow_networks: ["127.0.0.1/32"]
        tools:
          - name: whoami
            path: /whoami
    """
    write_tools(tmp_path, "echo.yaml", text)
    try:
        async with open_session(tmp_path) as s:
            r = await s.run("r = tools.echo.whoami()\nprint(r)\nr")
    finally:
        layers.reset_engines()
    assert r.is_ok, r.error
    sent = api.requests[0]["headers"]
    assert sent.get("X-Shop") == "zq8-from-env-77ab" or "literal" in sent["Authorization"]
    seen = r.stdout + json.dumps(r.value)
    assert "zq8-" not in seen, seen
