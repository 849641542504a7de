"""The direct link's handshake on real sockets, without a cluster: the host proves the
secret to the actor and the actor to the host, and connections that never prove it
cannot pile up on the actor's listener."""

from __future__ import annotations

import asyncio
import marshal
import os
import struct
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from codemode.cluster.link import MAX_UNPROVEN, NONCE, Link, LinkBroken, LinkServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def server() -> AsyncIterator[tuple[LinkServer, int, list[tuple[str, object]]]]:
    told: list[tuple[str, object]] = []

    async def answer(op: str, arg: object) -> bytes:
        return marshal.dumps((1, [("done", arg)]))

    srv = LinkServer(answer, lambda op, arg: told.append((op, arg)))
    _, port = await srv.open("127.0.0.1")
    yield srv, port, told
    await srv.close()


async def test_the_host_and_the_actor_each_prove_the_secret(
    server: tuple[LinkServer, int, list[tuple[str, object]]],
) -> None:
    srv, port, told = server
    link = await Link.connect("127.0.0.1", port, srv.secret, 10)
    assert await link.ask("poll", (b"r", 0)) == (1, [("done", (b"r", 0))])
    link.tell("hold", True)
    async with asyncio.timeout(10):
        while not told:
            await asyncio.sleep(0.01)
    assert told == [("hold", True)]
    link.close()
    with pytest.raises(LinkBroken):
        await Link.connect("127.0.0.1", port, bytes(32), 10)


async def test_a_peer_that_does_not_know_the_secret_is_not_trusted_by_the_host() -> None:
    """Whatever answers at the link's address (a process that took a dead actor's port)
    must prove the secret before the host sends it a run or unmarshals its frames."""
    heard: list[bytes] = []
    streams: list[asyncio.StreamWriter] = []

    async def impostor(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        streams.append(writer)
        writer.write(os.urandom(NONCE))
        heard.append(await reader.read(1 << 16))
        writer.write(b"\x01" + os.urandom(31))  # the old "accepted" byte, then anything
        data = marshal.dumps((1, [("done", "forged")]))
        writer.write(struct.pack(">I", len(data)) + data)
        await writer.drain()
        await reader.read()
        writer.close()

    fake = await asyncio.start_server(impostor, "127.0.0.1", 0)
    port = fake.sockets[0].getsockname()[1]
    try:
        with pytest.raises(LinkBroken):
            await Link.connect("127.0.0.1", port, os.urandom(32), 10)
    finally:
        fake.close()
        for w in streams:
            w.close()
        await asyncio.sleep(0.05)  # the handler sees its stream end


async def test_connections_that_never_prove_the_secret_do_not_pile_up(
    server: tuple[LinkServer, int, list[tuple[str, object]]],
) -> None:
    srv, port, _ = server
    idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(MAX_UNPROVEN + 40)]
    try:
        # Each newcomer past the cap drops the oldest silent one at once (not after the
        # 5 s the handshake allows): all but the last MAX_UNPROVEN are closed.
        async def closed(reader: asyncio.StreamReader) -> bool:
            try:
                data = await asyncio.wait_for(reader.read(), 2)
            except (TimeoutError, ConnectionError):
                return False
            return len(data) == NONCE  # the nonce, then the end

        ended = await asyncio.gather(*(closed(r) for r, _ in idle[:40]))
        assert all(ended)
        # The host, arriving during the flood, still gets in.
        link = await Link.connect("127.0.0.1", port, srv.secret, 10)
        assert await link.ask("poll", (b"r", 1)) == (1, [("done", (b"r", 1))])
        link.close()
    finally:
        for _, w in idle:
            w.close()


_SILENT_PEER = """
import asyncio, subprocess, sys
from codemode.cluster import link as L
L.KEEPALIVE = (1, 1, 2)

async def main() -> None:
    never = asyncio.Event()

    async def answer(op, arg):
        await never.wait()

    srv = L.LinkServer(answer, lambda op, arg: None)
    _, port = await srv.open("127.0.0.1")
    link = await L.Link.connect("127.0.0.1", port, srv.secret, 10)
    ask = asyncio.ensure_future(link.ask("poll", (b"r", 0)))
    await asyncio.sleep(0.2)
    # The network goes away under both ends: no FIN, no RST, packets go nowhere.
    subprocess.run(["ip", "link", "set", "lo", "down"], check=True)
    try:
        await asyncio.wait_for(ask, 20)
        print("answered")
    except L.LinkBroken:
        print("broken")
    except TimeoutError:
        print("hung")

asyncio.run(main())
"""


def _netns() -> bool:
    try:
        return subprocess.run(["unshare", "-rn", "true"], timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not _netns(), reason="needs unshare -rn (a network namespace of its own)")
def test_a_node_gone_without_a_word_breaks_the_link_and_the_host_goes_on_over_ray() -> None:
    """A read on a stream whose peer vanished (power lost, network cut) waits forever
    unless TCP keepalive probes it: the run would hang instead of hearing from Ray that
    the node was lost. Run in a network namespace whose loopback is then taken down."""
    script = f"ip link set lo up && exec {sys.executable} -c '{_SILENT_PEER}'"
    out = subprocess.run(
        ["unshare", "-rn", "sh", "-c", script], capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "broken", out.stderr[-2000:]
