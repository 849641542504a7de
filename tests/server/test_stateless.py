"""Both protocol eras over HTTP, with the official SDK and with a client written here
from the spec (``rawclient``: httpx only, no SDK)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from .conftest import TOKEN, HttpServer, http_client
from .rawclient import MODERN, RawClient, text
from .test_stdio import text_of

pytestmark = pytest.mark.anyio


async def test_a_negotiating_sdk_client_with_a_codemode_session_uses_the_stateless_protocol(
    http_server: HttpServer,
) -> None:
    headers = {"Codemode-Session": "negotiated-agent"}
    async with http_client(http_server.url, headers=headers, mode="auto") as client:
        await client.call_tool("run_code", {"code": "n = 6"})
        result = await client.call_tool("run_code", {"code": "n * 7"})
        version = client.protocol_version
    assert version == MODERN
    assert text_of(result) == "42"


async def test_a_negotiating_sdk_client_without_one_gets_the_handshake(
    http_server: HttpServer,
) -> None:
    async with http_client(http_server.url, mode="auto") as client:
        version = client.protocol_version
    assert version in HANDSHAKE_PROTOCOL_VERSIONS


def test_discovery_offers_the_stateless_protocol_to_a_client_that_keeps_a_session(
    http_server: HttpServer,
) -> None:
    keeps = {"Codemode-Session": "raw-1"}
    with RawClient(http_server.url, token=TOKEN, era="stateless", headers=keeps) as client:
        offered = client.rpc("server/discover")["result"]["supportedVersions"]
    with RawClient(http_server.url, token=TOKEN, era="stateless") as client:
        without = client.rpc("server/discover")["result"]["supportedVersions"]
    assert MODERN in offered and set(HANDSHAKE_PROTOCOL_VERSIONS) <= set(offered)
    assert MODERN not in without


def test_an_independent_stateless_client_keeps_state_under_its_codemode_session(
    http_server: HttpServer,
) -> None:
    keeps = {"Codemode-Session": "raw-agent-42"}
    with RawClient(http_server.url, token=TOKEN, era="stateless", headers=keeps) as client:
        listed = client.rpc("tools/list")["result"]["tools"]
        client.call("run_code", {"code": "seen = [1, 2]"})
        result = client.call("run_code", {"code": "seen + [3]"})
    assert "run_code" in {t["name"] for t in listed}
    assert result["isError"] is False
    assert result["structuredContent"]["value"] == [1, 2, 3]
    assert result["structuredContent"]["session"] == "persistent"


def test_two_long_codemode_sessions_that_share_a_prefix_are_two_sessions(
    http_server: HttpServer,
) -> None:
    """The whole value names the session: cut to its first 200 characters, a long id made
    of a known prefix and a random tail could be taken by anyone who knew the prefix."""
    prefix = "team-analytics/" + "p" * 200
    victim = {"Codemode-Session": prefix + "/7f3c9a1e-victim"}
    other = {"Codemode-Session": prefix + "/guess"}
    with RawClient(http_server.url, token=TOKEN, era="stateless", headers=victim) as client:
        client.call("run_code", {"code": "secret = 'victim-data'"})
    with RawClient(http_server.url, token=TOKEN, era="stateless", headers=other) as client:
        stolen = client.call("run_code", {"code": "secret"})
    with RawClient(http_server.url, token=TOKEN, era="stateless", headers=victim) as client:
        kept = client.call("run_code", {"code": "secret"})
    assert stolen["isError"] is True and "NameError" in text(stolen), text(stolen)
    assert kept["structuredContent"]["value"] == "victim-data"


def test_an_independent_stateless_client_without_a_session_runs_ephemerally(
    http_server: HttpServer,
) -> None:
    with RawClient(http_server.url, token=TOKEN, era="stateless") as client:
        client.call("run_code", {"code": "lost = 1"})
        result = client.call("run_code", {"code": "lost"})
    assert result["isError"] is True and "NameError" in text(result)
    assert result["structuredContent"]["session"] == "ephemeral"


def test_an_independent_handshake_client_keeps_state_until_it_ends_its_session(
    http_server: HttpServer,
) -> None:
    with RawClient(http_server.url, token=TOKEN, era="handshake") as client:
        init = client.initialize()
        client.call("run_code", {"code": "x = 20"})
        result = client.call("run_code", {"code": "x * 2 + 2"})
        before = http_server.health()["sessions"]
        assert client.end() == 200
    assert init["result"]["protocolVersion"] in HANDSHAKE_PROTOCOL_VERSIONS
    assert text(result) == "42"
    http_server.wait_health("sessions", before - 1)


def test_callers_without_a_session_never_share_a_session_scoped_vault(tmp_path: Path) -> None:
    """With ``vault.scope: session``, a token is its session's alone. Callers without a
    session are each a session of one call: a token one of them was given must not become
    the real value in another's tool call (they once shared one client name, "ephemeral")."""
    import json
    import re

    from .conftest import make_workspace, start_http_server

    base, files = make_workspace(tmp_path)
    privacy = {"privacy": {"enabled": True, "vault": {"scope": "session"}}}
    (base / "config.json").write_text(json.dumps(privacy))
    server = start_http_server(base)
    try:
        with RawClient(server.url, token=TOKEN, era="stateless") as first:
            shown = first.call("run_code", {"code": "print('alice@example.com')"})
        token = re.search(r"\[EMAIL_[^\]]+\]", text(shown))
        assert token is not None, text(shown)
        target = files / "from-another-caller.txt"
        code = f"tools.fs.write_file(path={str(target)!r}, content={token.group(0)!r})"
        with RawClient(server.url, token=TOKEN, era="stateless") as second:
            wrote = second.call("run_code", {"code": code})
        assert not target.exists() or "alice@example.com" not in target.read_text()
        assert wrote["isError"] is True, text(wrote)
    finally:
        server.stop()
