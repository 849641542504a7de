"""DNS rebinding: a server on a loopback address answers only loopback ``Host``/``Origin``.

A web page whose name was re-pointed at 127.0.0.1 is same-origin with the server for the
browser, so a missing CORS header stops nothing; only the ``Host`` (and ``Origin``) it
sends give it away. Every route must check them, under ``--no-auth`` too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from .conftest import INITIALIZE, HttpServer, start_http_server

ROUTES = ["/mcp", "/ui", "/api/console", "/api/tools/search", "/metrics"]
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module", params=["127.0.0.1", "127.0.0.2"])
def open_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpServer]:
    """A ``--no-auth`` server on a loopback address (127.0.0.2: one the SDK does not check)."""
    base = tmp_path_factory.mktemp("rebind") / "ws"
    server = start_http_server(base, "--host", request.param, "--no-auth", token=None)
    try:
        yield server
    finally:
        server.stop()


def _get(server: HttpServer, path: str, **headers: str) -> httpx2.Response:
    root = server.url.removesuffix("/mcp")
    if path == "/mcp":
        return httpx2.post(root + path, json=INITIALIZE, headers={**ACCEPT, **headers}, timeout=10)
    return httpx2.get(root + path, headers=headers, timeout=10)


@pytest.mark.parametrize("path", ROUTES)
def test_a_foreign_host_header_is_refused_on_every_route(
    open_server: HttpServer, path: str
) -> None:
    refused = _get(open_server, path, Host="evil.example")
    assert refused.status_code == 421, refused.text
    assert "DNS rebinding" in refused.json()["error_description"]
    assert "sessions" not in refused.text


@pytest.mark.parametrize("path", ROUTES)
def test_a_foreign_origin_is_refused_on_every_route(open_server: HttpServer, path: str) -> None:
    for origin in (
        "http://evil.example",
        "null",
        "http://127.0.0.1.evil.example",
        "http://localhost.evil.example",
        "http://localhost..",
        "http://[::1].evil.example",
    ):
        refused = _get(open_server, path, Origin=origin)
        assert refused.status_code == 403, (origin, refused.text)


@pytest.mark.parametrize("path", ROUTES)
def test_loopback_hosts_and_origins_are_served(open_server: HttpServer, path: str) -> None:
    port = open_server.url.rsplit(":", 1)[1].split("/")[0]
    bound = open_server.url.split("/")[2].rsplit(":", 1)[0]
    for host in ("localhost", "LocalHost.", "127.0.0.1", "[::1]", bound):
        for origin in (f"http://{host}", f"http://{host}:{port}"):
            served = _get(open_server, path, Host=f"{host}:{port}", Origin=origin)
            assert served.status_code == 200, (host, origin, served.status_code, served.text)


@pytest.mark.parametrize(
    "host",
    [
        "localhost.evil.example",
        "localhost..",
        "127.0.0.1.",
        "evil.",
        "[::1].evil.example",
        "[::1]evil:80",
        "[::1]:80x",
    ],
)
def test_names_that_only_look_like_loopback_are_refused(open_server: HttpServer, host: str) -> None:
    assert _get(open_server, "/api/console", Host=host).status_code == 421


def test_health_stays_open_to_probes_whatever_their_host(open_server: HttpServer) -> None:
    root = open_server.url.removesuffix("/mcp")
    assert (
        httpx2.get(root + "/healthz", headers={"Host": "pod.internal"}, timeout=10).status_code
        == 200
    )


def test_a_server_on_another_address_needs_its_token_instead(tmp_path: Path) -> None:
    server = start_http_server(tmp_path / "ws", "--host", "0.0.0.0")
    try:
        root = server.url.removesuffix("/mcp").replace("0.0.0.0", "127.0.0.1")
        answer = httpx2.get(root + "/api/console", headers={"Host": "codemode.example"}, timeout=10)
    finally:
        server.stop()
    assert answer.status_code == 401
