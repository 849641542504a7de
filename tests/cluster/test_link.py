"""The direct link from the host to a session's actor (real cluster, real sandbox): runs go
over it, a break at any point of a run falls back to Ray calls with nothing lost, and
nothing that lacks the session's secret can drive the sandbox."""

from __future__ import annotations

import asyncio
import marshal
import socket
import struct

import pytest

from codemode import Session
from codemode.cluster import RayWorker
from codemode.cluster.link import Link, LinkBroken

from .conftest import RayCluster
from .test_ray_executor import SLEEPS_AFTER_PROBE, executor, probe, worker_of

pytestmark = [pytest.mark.anyio, pytest.mark.ray]


async def linked(s: Session) -> RayWorker:
    """The session's worker once its link is up (the first run opens it in the background)."""
    assert (await s.run("None")).error is None
    return await up(worker_of(s))


async def up(worker: RayWorker) -> RayWorker:
    async with asyncio.timeout(60):
        while not worker.linked:
            await asyncio.sleep(0.02)
    return worker


def cut(worker: RayWorker) -> None:
    """Break the link's TCP stream under both ends, as a network fault would."""
    link = worker._link.up if worker._link is not None else None
    assert link is not None
    link._writer.get_extra_info("socket").shutdown(socket.SHUT_RDWR)


async def test_runs_go_over_the_link_once_it_is_up_and_keep_their_state(
    cluster: RayCluster,
) -> None:
    async with Session(executor(cluster)) as s:
        assert not worker_of(s).linked  # a worker that never ran opens no link
        w = await linked(s)
        assert (await s.run("x = 41")).error is None
        assert (await s.run("x + 1")).value == 42
        assert w.linked


async def test_a_link_cut_after_a_reply_went_over_it_falls_back_and_the_run_answers(
    cluster: RayCluster,
) -> None:
    async with Session(executor(cluster)) as s:
        w = await linked(s)
        calls: list[int] = []
        loop = asyncio.get_running_loop()

        def ready(n: int) -> int:
            """Answers n + 1; the first call cuts the link just after its reply went."""
            calls.append(n)
            if len(calls) == 1:  # (a sync tool runs on a thread of its own)
                loop.call_soon_threadsafe(loop.call_later, 0.2, cut, w)
            return n + 1

        s.register_tool(ready, server="probe")
        code = (
            "a = tools.probe.ready(n=1)\nimport time; time.sleep(1)\n"
            "b = tools.probe.ready(n=a)\na + b"
        )
        r = await asyncio.wait_for(s.run(code), 120)
        assert r.error is None, r.error
        assert r.value == 5 and calls == [1, 2] and not r.state_lost
        assert not w.linked
        # The next run goes over Ray while the link opens again, then over the link.
        assert (await s.run("a, b")).value == [2, 3]
        await up(w)
        assert (await s.run("a + b")).value == 5


async def test_a_link_cut_while_the_run_request_is_out_runs_the_code_once(
    cluster: RayCluster,
) -> None:
    async with Session(executor(cluster)) as s:
        w = await linked(s)
        await s.run("n = 0")
        asyncio.get_running_loop().call_later(0.2, cut, w)
        r = await asyncio.wait_for(s.run("import time; time.sleep(1)\nn += 1\nn"), 120)
        assert r.error is None, r.error
        assert r.value == 1 and not r.state_lost


async def test_a_wrong_secret_is_refused_and_the_right_one_accepted(cluster: RayCluster) -> None:
    async with Session(executor(cluster)) as s:
        w = worker_of(s)
        host, port, secret = await w._where()
        with pytest.raises(LinkBroken):
            await Link.connect(host, port, bytes(32), 10)
        link = await Link.connect(host, port, secret, 10)
        link.close()


async def test_a_run_sent_without_the_handshake_never_runs(cluster: RayCluster) -> None:
    async with Session(executor(cluster)) as s:
        host, port, _ = await worker_of(s)._where()
        reader, writer = await asyncio.open_connection(host, port)
        await reader.readexactly(32)  # the nonce; answered with a run frame instead
        data = marshal.dumps(("run", (b"12345678", "pwned = 1", 10.0, 0)))
        frame = struct.pack(">I", len(data)) + data
        writer.write(frame + frame)
        assert await asyncio.wait_for(reader.read(), 30) == b""  # closed, nothing answered
        writer.close()
        assert (await s.run("'pwned' in globals()")).value is False


async def test_frames_injected_into_the_link_or_replayed_on_it_never_run(
    cluster: RayCluster,
) -> None:
    """Past the handshake, every frame must carry the stream's tag for its place: a run
    frame written into the stream without it, or a frame recorded and written again, is
    refused before it is read, the stream is closed, and the session goes on over Ray
    (then over a new link) with its state."""
    async with Session(executor(cluster)) as s:
        w = await linked(s)
        assert (await s.run("n = 0")).error is None
        link = w._link.up if w._link is not None else None
        assert link is not None
        data = marshal.dumps(("run", (b"12345678", "pwned = 1", 10.0, 0)))
        link._writer.write(struct.pack(">I", len(data)) + data)  # a frame as it was untagged
        # The actor takes the next frame's first bytes for the forged one's tag: wrong, so
        # it closes the stream, and the host sends its run again over Ray.
        r = await s.run("n += 1\n('pwned' in globals(), n)")
        assert r.value == [False, 1] and not r.state_lost
        assert (await s.run("n")).value == 1  # over Ray; it opens a new link meanwhile
        w = await up(w)
        link = w._link.up if w._link is not None else None
        assert link is not None
        sent: list[bytes] = []
        write = link._writer.write

        def recording(frame: bytes) -> None:
            sent.append(bytes(frame))
            write(frame)

        link._writer.write = recording  # type: ignore[method-assign,assignment]
        assert (await s.run("n += 1\nn")).value == 2
        runs = [f for f in sent if b"n += 1" in f]
        assert runs, sent
        write(runs[0])  # the same run frame again, as recorded
        async with asyncio.timeout(60):
            while not link._reader.at_eof():
                await asyncio.sleep(0.02)
        assert (await s.run("n")).value == 2


async def test_with_the_link_off_runs_and_tool_calls_go_over_ray_calls(
    cluster: RayCluster,
) -> None:
    def echo(x: int) -> int:
        """Returns x."""
        return x

    async with Session(executor(cluster, direct=False)) as s:
        s.register_tool(echo, server="host")
        assert (await s.run("y = tools.host.echo(x=4)")).error is None
        assert (await s.run("y * 2")).value == 8
        assert not worker_of(s).linked


async def test_interrupt_and_cancel_of_a_run_over_the_link_keep_the_state(
    cluster: RayCluster,
) -> None:
    async with Session(executor(cluster)) as s:
        started = probe(s)
        w = await linked(s)
        await s.run("kept = 'yes'")
        run = asyncio.create_task(s.run(SLEEPS_AFTER_PROBE, 900))
        await asyncio.wait_for(started.wait(), 120)
        assert w.linked and s.interrupt()  # sent over the link
        r = await asyncio.wait_for(run, 120)
        assert r.error is not None and r.error.type == "KeyboardInterrupt"
        await up(w)
        started.clear()
        run = asyncio.create_task(s.run(SLEEPS_AFTER_PROBE, 900))
        await asyncio.wait_for(started.wait(), 120)
        run.cancel()  # mid-read on the link: it closes, the run is followed over Ray
        with pytest.raises(asyncio.CancelledError):
            await run
        after = await asyncio.wait_for(s.run("kept"), 60)
        assert after.value == "yes" and not after.state_lost


async def test_a_hold_sent_before_the_link_broke_is_released_once_over_ray(
    cluster: RayCluster,
) -> None:
    """An approval holds the run's timeout: the hold goes over the link, the link breaks
    while the person decides, the release goes over Ray. The run outlives its timeout
    while held and times out again once released (no hold left behind)."""
    from codemode.execution.base import waiting_for_person

    async with Session(executor(cluster)) as s:
        w = await linked(s)

        async def ask_person(seconds: float) -> str:
            """Waits for a person for ``seconds``."""
            with waiting_for_person():
                await asyncio.sleep(0.5)
                cut(w)  # mid-wait: the release cannot go over the link
                await asyncio.sleep(seconds)
            return "approved"

        s.register_tool(ask_person, server="probe")
        code = "a = tools.probe.ask_person(seconds=3)\nimport time; time.sleep(4)\na"
        r = await asyncio.wait_for(s.run(code, 2.5), 120)
        assert r.error is not None and "imeout" in r.error.type + r.error.message, r
        assert r.value is None and not r.state_lost
        assert (await s.run("a")).value == "approved"


async def test_with_the_link_off_holds_and_interrupts_go_over_ray_calls(
    cluster: RayCluster,
) -> None:
    from codemode.execution.base import waiting_for_person

    async def ask_person(seconds: float) -> str:
        """Waits for a person for ``seconds``."""
        with waiting_for_person():
            await asyncio.sleep(seconds)
        return "approved"

    async with Session(executor(cluster, direct=False)) as s:
        s.register_tool(ask_person, server="probe")
        started = probe(s)
        r = await asyncio.wait_for(s.run("a = tools.probe.ask_person(seconds=3)\na", 2), 120)
        assert r.value == "approved", r.error  # held past its 2 s
        run = asyncio.create_task(s.run(SLEEPS_AFTER_PROBE, 900))
        await asyncio.wait_for(started.wait(), 120)
        assert s.interrupt()
        r = await asyncio.wait_for(run, 120)
        assert r.error is not None and r.error.type == "KeyboardInterrupt"
        assert (await s.run("a")).value == "approved"
