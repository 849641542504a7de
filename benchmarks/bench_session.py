"""Issue 2 figures: run round trip vs a bare pipe echo, start times, idle RSS, concurrency.

python benchmarks/bench_session.py [--n 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _stats import median, pct, table
from codemode import Session, SubprocessExecutor
from codemode.execution.pool import close_pools

ECHO = r"""
import os, struct
r, w = 0, 1
while True:
    h = os.read(r, 4)
    if not h: break
    n = struct.unpack('>I', h)[0]
    b = b''
    while len(b) < n: b += os.read(r, n - len(b))
    os.write(w, h + b)
"""


def start_echo() -> tuple[subprocess.Popen[bytes], int, int, bytes]:
    """The echo child, its write and read fds, and a frame the size of a run request."""
    p = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", ECHO],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        bufsize=0,
    )
    assert p.stdin and p.stdout
    msg = b'{"op":"run","id":1,"code":"x+1"}'
    return p, p.stdin.fileno(), p.stdout.fileno(), struct.pack(">I", len(msg)) + msg


def echo_floor(n: int) -> list[float]:
    """A bare length-prefixed echo over pipes to a child process: the floor."""
    p, wfd, rfd, frame = start_echo()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        os.write(wfd, frame)
        got = b""
        while len(got) < len(frame):
            got += os.read(rfd, 65536)
        times.append(time.perf_counter() - t)
    assert p.stdin
    p.stdin.close()
    p.wait()
    return times


async def asyncio_echo_floor(n: int) -> list[float]:
    """The same echo driven by an asyncio event loop, as the session's host side is."""
    p, wfd, rfd, frame = start_echo()
    loop = asyncio.get_running_loop()
    buf = bytearray()
    waiter: asyncio.Future[None] | None = None

    def readable() -> None:
        buf.extend(os.read(rfd, 65536))
        if waiter is not None and len(buf) >= len(frame) and not waiter.done():
            waiter.set_result(None)

    loop.add_reader(rfd, readable)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        waiter = loop.create_future()
        os.write(wfd, frame)
        await waiter
        buf.clear()
        times.append(time.perf_counter() - t)
    loop.remove_reader(rfd)
    assert p.stdin
    p.stdin.close()
    p.wait()
    return times


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def main(n: int) -> None:
    floor = echo_floor(n)
    afloor = await asyncio_echo_floor(n)

    ex = SubprocessExecutor(pool_size=0)
    cold = []
    for _ in range(15):
        t = time.perf_counter()
        s = Session(ex)
        await s.start()
        cold.append(time.perf_counter() - t)
        await s.close()

    ex_pool = SubprocessExecutor(pool_size=1)
    warm = []
    for _ in range(15):
        await ex_pool.warm()
        await asyncio.sleep(0.15)  # let the pooled interpreter finish booting
        t = time.perf_counter()
        s = Session(ex_pool)
        await s.start()
        warm.append(time.perf_counter() - t)
        await s.close()

    async with Session(SubprocessExecutor()) as s:
        await s.run("x = 1")
        for _ in range(200):
            await s.run("x+1")
        runs = []
        for _ in range(n):
            t = time.perf_counter()
            r = await s.run("x+1")
            runs.append(time.perf_counter() - t)
            assert r.value == 2
        pid = (await s.run("import os; os.getpid()")).value
        idle_rss = rss_mb(pid)

    # 20 sessions running code concurrently on this machine's cores.
    per = 200
    sessions = [Session(SubprocessExecutor()) for _ in range(20)]
    await asyncio.gather(*(s.start() for s in sessions))

    async def work(s: Session) -> None:
        await s.run("acc = 0")
        for i in range(per):
            await s.run(f"acc += sum(range({i % 50}))")

    t = time.perf_counter()
    await asyncio.gather(*(work(s) for s in sessions))
    elapsed = time.perf_counter() - t
    await asyncio.gather(*(s.close() for s in sessions))

    ms = 1000
    p50, f50, a50 = median(runs) * ms, median(floor) * ms, median(afloor) * ms
    print(
        table(
            f"Round trip of run('x+1'), {n} runs (ms)",
            ["what", "p50", "p95", "x blocking floor", "x asyncio floor", "target"],
            [
                ["bare echo, blocking I/O (floor)", f50, pct(floor, 95) * ms, 1.0, f50 / a50, ""],
                ["bare echo, asyncio loop", a50, pct(afloor, 95) * ms, a50 / f50, 1.0, ""],
                [
                    "SubprocessExecutor warm run",
                    p50,
                    pct(runs, 95) * ms,
                    p50 / f50,
                    p50 / a50,
                    "p50 <= 0.3 ms, <= 4x floor",
                ],
            ],
        )
    )
    print(
        table(
            "Session start (ms)",
            ["what", "p50", "p95", "target"],
            [
                ["from the warm pool", median(warm) * ms, pct(warm, 95) * ms, "<= 5 ms"],
                ["cold (new interpreter)", median(cold) * ms, pct(cold, 95) * ms, "<= 60 ms"],
            ],
        )
    )
    print(table("Idle worker", ["what", "value", "target"], [["RSS (MB)", idle_rss, "<= 25 MB"]]))
    total = 20 * (per + 1)
    print(
        table(
            f"20 sessions running code concurrently on {os.cpu_count()} cores",
            ["runs", "seconds", "runs/s"],
            [[total, elapsed, total / elapsed]],
        )
    )
    close_pools()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    asyncio.run(main(ap.parse_args().n))
