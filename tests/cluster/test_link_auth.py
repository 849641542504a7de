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
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from codemode.cluster.link import (
    HOST,
    MAX_UNPROVEN,
    NONCE,
    TAG,
    Link,
    LinkBroken,
    LinkServer,
    proof,
)

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


async def _handshake(port: int, secret: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A host's side of the handshake done by hand: the stream is then the link's."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    nonce = await reader.readexactly(NONCE)
    writer.write(proof(secret, nonce, HOST) + os.urandom(NONCE))
    await reader.readexactly(32)
    return reader, writer


def _untagged(msg: tuple[str, Any]) -> bytes:
    data = marshal.dumps(msg)
    return struct.pack(">I", len(data)) + data + bytes(TAG)


async def _closed(reader: asyncio.StreamReader) -> bool:
    return await asyncio.wait_for(reader.read(), 10) == b""


async def test_a_frame_without_the_links_tag_is_refused_and_closes_the_stream(
    server: tuple[LinkServer, int, list[tuple[str, object]]], caplog: pytest.LogCaptureFixture
) -> None:
    """A peer past the handshake (or anything that can write into the stream) cannot
    drive the actor with frames it did not tag with the stream's key."""
    srv, port, told = server
    reader, writer = await _handshake(port, srv.secret)
    writer.write(_untagged(("hold", True)) + _untagged(("run", (b"r", "pwned = 1", 10.0, 0))))
    try:
        assert await _closed(reader)
    finally:
        writer.close()
    assert told == []
    assert "failed its authentication" in caplog.text and "the link is closed" in caplog.text


class _Tap:
    """A TCP relay between the host and the actor that records and can rewrite what the
    actor sends (what a machine on the path could do)."""

    def __init__(self, port: int, rewrite: Callable[[bytes], bytes] = lambda b: b) -> None:
        self.port = port
        self.rewrite = rewrite
        self.streams: list[asyncio.StreamWriter] = []
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> int:
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for w in self.streams:
            w.close()
        await asyncio.sleep(0.05)  # the actor's handler sees its stream end

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        a_reader, a_writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.streams += [writer, a_writer]

        async def pump(r: asyncio.StreamReader, w: asyncio.StreamWriter, edit: bool) -> None:
            seen = 0
            while data := await r.read(1 << 16):
                seen += len(data)
                # The handshake (nonce, proof) passes untouched; frames after it may not.
                w.write(self.rewrite(data) if edit and seen > NONCE + 32 else data)
            w.close()

        self.tasks += [
            asyncio.ensure_future(pump(reader, a_writer, False)),
            asyncio.ensure_future(pump(a_reader, writer, True)),
        ]


async def test_the_host_refuses_an_answer_altered_on_the_way(
    server: tuple[LinkServer, int, list[tuple[str, object]]],
) -> None:
    srv, port, _ = server

    def flip(data: bytes) -> bytes:  # ("done", ...) becomes ("dome", ...)
        return data.replace(b"done", b"dome")

    async with _Tap(port, flip) as tapped:
        link = await Link.connect("127.0.0.1", tapped, srv.secret, 10)
        with pytest.raises(LinkBroken, match="failed its authentication"):
            await link.ask("poll", (b"r", 0))
        assert link.broken


async def test_a_replayed_frame_is_refused(
    server: tuple[LinkServer, int, list[tuple[str, object]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frame recorded on the wire and written again (to the same stream) carries the
    right tag for its place, not for the next: the actor refuses it and closes."""
    srv, port, told = server
    sent: list[bytes] = []
    async with _Tap(port) as tapped:
        link = await Link.connect("127.0.0.1", tapped, srv.secret, 10)
        write = link._writer.write

        def recording(data: bytes) -> None:
            sent.append(bytes(data))
            write(data)

        monkeypatch.setattr(link._writer, "write", recording)
        link.tell("reply", (b"r", 1, "yes"))
        assert await link.ask("poll", (b"r", 0)) == (1, [("done", (b"r", 0))])
        assert told == [("reply", (b"r", 1, "yes"))]
        write(sent[0])  # the reply again, as recorded
        with pytest.raises(LinkBroken):
            await link.ask("poll", (b"r", 1))
    assert told == [("reply", (b"r", 1, "yes"))]
