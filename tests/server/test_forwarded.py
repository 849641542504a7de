"""--client-share behind a reverse proxy: the forwarded header names the client, but only
from the proxies --forwarded-allow-ips names; from anyone else it is a spoof.

uvicorn believed X-Forwarded-For from 127.0.0.1 by default: a local client took a new
identity per request and no share held. Each server holds 1 session.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from codemode.server.forwarded import TrustedProxies

from .conftest import HttpServer, http_client, make_workspace, start_http_server
from .test_stdio import text_of

pytestmark = pytest.mark.anyio

SHARE = ("--max-sessions", "1", "--client-share", "0.5", "--queue-timeout", "30")


async def third_while_one_holds_and_one_waits(
    server: HttpServer,
    holder: dict[str, str],
    waiter: dict[str, str],
    third: dict[str, str],
    *,
    waiter_address: str | None = None,
) -> tuple[str, str]:
    """The one session is held by ``holder`` while ``waiter`` queues; ``third`` asks then:
    as the holder's client it is refused at once (over its share while another waits),
    as any other it would queue. Then the holder leaves: the waiter's answer."""
    release, waited = anyio.Event(), anyio.Event()
    answers: dict[str, str] = {}

    async def ask(name: str, headers: dict[str, str], address: str | None = None) -> None:
        async with http_client(server.url, headers=headers, local_address=address) as c:
            r = await c.call_tool("run_code", {"code": f"{name!r}"})
            answers[name] = ("refused: " if r.is_error else "") + text_of(r)
            if name == "holder":
                await release.wait()
        if name == "waiter":
            waited.set()

    async def health(key: str, value: int) -> None:
        await anyio.to_thread.run_sync(server.wait_health, key, value, 30.0)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "holder", holder)
            await health("sessions", 1)
            tg.start_soon(ask, "waiter", waiter, waiter_address)
            await health("queued", 1)
            with anyio.fail_after(20):  # refused at once; queued, it would wait 30 s
                await ask("third", third)
            release.set()
            with anyio.fail_after(30):
                await waited.wait()
    finally:
        release.set()
        server.stop()
    return answers["third"], answers["waiter"]


@pytest.mark.parametrize("header", ["X-Forwarded-For", "Forwarded"])
async def test_a_forwarded_header_from_an_untrusted_peer_does_not_make_a_new_client(
    tmp_path: Path, header: str
) -> None:
    base, _ = make_workspace(tmp_path)
    server = start_http_server(base, *SHARE)
    value = {"X-Forwarded-For": "10.0.0.{}", "Forwarded": "for=10.0.0.{}"}[header]
    third, waiter = await third_while_one_holds_and_one_waits(
        server,
        {header: value.format(1)},
        {},
        {header: value.format(2)},
        waiter_address="127.0.0.2",
    )
    assert third.startswith("refused") and "(127.0.0.1) already holds 1" in third, third
    assert waiter == "waiter"


async def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_share(
    tmp_path: Path,
) -> None:
    """All three come through the proxy (127.0.0.1). The holder's second request is
    refused as its own client's, even with another address written to the left of its
    own (the proxy appends the real one); the other client waits its turn and is served."""
    base, _ = make_workspace(tmp_path)
    server = start_http_server(base, *SHARE, "--forwarded-allow-ips", "127.0.0.0/8")
    third, waiter = await third_while_one_holds_and_one_waits(
        server,
        {"X-Forwarded-For": "10.0.0.1"},
        {"X-Forwarded-For": "10.0.0.2"},
        {"X-Forwarded-For": "10.9.9.9, 10.0.0.1"},
    )
    assert third.startswith("refused") and "(10.0.0.1) already holds 1" in third, third
    assert waiter == "waiter"


async def test_rfc_7239_forwarded_is_read_when_the_proxy_writes_it(tmp_path: Path) -> None:
    base, _ = make_workspace(tmp_path)
    argv = (*SHARE, "--forwarded-allow-ips", "127.0.0.1", "--forwarded-header", "forwarded")
    server = start_http_server(base, *argv)
    third, waiter = await third_while_one_holds_and_one_waits(
        server,
        {"Forwarded": 'for="[2001:db8::1]:4711";proto=https'},
        {"Forwarded": "for=192.0.2.60"},
        {"X-Forwarded-For": "10.0.0.3", "Forwarded": "for=2001:db8::1"},
    )
    assert third.startswith("refused") and "(2001:db8::1) already holds 1" in third, third
    assert waiter == "waiter"


def test_every_peer_and_a_wildcard_are_refused_as_trusted_proxies() -> None:
    with pytest.raises(ValueError, match="every client"):
        TrustedProxies("*")
    with pytest.raises(ValueError, match="not an IP address"):
        TrustedProxies("proxy.internal")
    proxies = TrustedProxies("10.0.0.0/8, ::1")
    chain = [(b"x-forwarded-for", b"1.1.1.1, 10.0.0.7"), (b"x-forwarded-for", b"10.0.0.8")]
    assert proxies.client("10.0.0.9", chain) == "1.1.1.1"  # every proxy hop skipped
    assert proxies.client("192.0.2.1", chain) == "192.0.2.1"  # not a proxy: not believed
    assert proxies.client("::ffff:10.0.0.9", [(b"x-forwarded-for", b"2.2.2.2")]) == "2.2.2.2"
    assert proxies.client("10.0.0.9", []) == "10.0.0.9"
