"""Issue 5 figures: skill search at 5,000 skills, artifact save+load (1 KB, 50 MB) on both
backends with peak memory, and ``skills.invoke`` overhead vs a function in the session.

python benchmarks/bench_memory.py [--skills 5000] [--queries 300] [--big-mb 50]

Needs /usr/bin/redis-server for the Redis rows (skipped with a note when absent).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests" / "storage"))
from _stats import median, pct, table
from codemode.memory.artifacts import Artifacts
from codemode.memory.skills import Skills
from codemode.storage import FileStorage, Storage

WORDS = [
    "fetch",
    "parse",
    "json",
    "csv",
    "html",
    "table",
    "image",
    "resize",
    "crop",
    "upload",
    "download",
    "retry",
    "cache",
    "github",
    "issue",
    "pull",
    "request",
    "comment",
    "label",
    "repository",
    "branch",
    "commit",
    "diff",
    "file",
    "directory",
    "search",
    "index",
    "query",
    "rank",
    "filter",
    "sort",
    "group",
    "count",
    "sum",
    "average",
    "report",
    "chart",
    "plot",
    "email",
    "send",
    "slack",
    "message",
    "calendar",
    "event",
    "schedule",
    "weather",
    "forecast",
    "city",
    "price",
    "stock",
    "currency",
    "convert",
    "translate",
    "summarize",
    "extract",
    "text",
    "pdf",
    "page",
    "invoice",
    "customer",
    "order",
    "payment",
    "user",
]


def synthetic_skill(i: int, rnd: random.Random) -> tuple[str, str, str]:
    words = rnd.sample(WORDS, 6)
    name = f"{words[0]}_{words[1]}_{i}"
    desc = f"{words[0].title()} {words[1]} {words[2]} and {words[3]} the {words[4]} {words[5]}"
    code = (
        f"def run({words[2]}: str, {words[3]}: int = 1):\n"
        f"    result = tools.x.{words[4]}(q={words[2]})\n"
        f"    return [r for r in result if r.get({words[5]!r})]\n"
    )
    return name, desc, code


async def bench_search(store: Storage, label: str, n: int, queries: int) -> list[list[object]]:
    rnd = random.Random(5)
    setup = Skills(store)
    if not (await store.list("skills")).records:
        sem = asyncio.Semaphore(16)

        async def one(i: int) -> None:
            name, desc, code = synthetic_skill(i, rnd)
            async with sem:
                await setup.create(name, code, desc)

        await asyncio.gather(*(one(i) for i in range(n)))
    skills = Skills(store)
    qs = [" ".join(rnd.sample(WORDS, 3)) for _ in range(queries)]
    t = time.perf_counter()
    await skills.search(qs[0])
    first = (time.perf_counter() - t) * 1000
    times = []
    for q in qs:
        t = time.perf_counter()
        await skills.search(q, 10)
        times.append((time.perf_counter() - t) * 1000)
    await skills.create("one_more_skill", "def run():\n    return 1", "Invalidate the index")
    t = time.perf_counter()
    await skills.search(qs[1])
    after_change = (time.perf_counter() - t) * 1000
    # Baseline in the same run: the ranker alone over the same documents (no storage).
    index, _ = skills._index
    raw = []
    for q in qs:
        t = time.perf_counter()
        index.search(q, 10)
        raw.append((time.perf_counter() - t) * 1000)
    return [
        [f"{label}: skills.search", n, first, after_change, median(times), pct(times, 95),
         median(times) / median(raw)],
        [f"{label}: LexicalIndex only (baseline)", n, "-", "-", median(raw), pct(raw, 95), 1.0],
    ]  # fmt: skip


async def timed(fn: Callable[[], Awaitable[object]], repeat: int) -> tuple[float, float]:
    """(median ms, peak traced MB above the starting point) over ``repeat`` runs."""
    times = []
    peak = 0
    for _ in range(repeat):
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        t = time.perf_counter()
        await fn()
        times.append((time.perf_counter() - t) * 1000)
        peak = max(peak, tracemalloc.get_traced_memory()[1] - base)
    return median(times), peak / 1e6


async def bench_artifacts(store: Storage, label: str, size: int, repeat: int) -> list[object]:
    arts = Artifacts(store)
    data = os.urandom(size)

    async def save_load() -> None:
        await arts.save("bench", data)
        loaded = await arts.load("bench")
        assert len(loaded) == size

    ms, mb = await timed(save_load, repeat)
    return [label, _size(size), ms, mb, mb * 1e6 / size]


def file_baseline(directory: Path, size: int, repeat: int) -> list[object]:
    data = os.urandom(size)
    path = directory / "baseline.bin"
    times = []
    peak = 0
    for _ in range(repeat):
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        t = time.perf_counter()
        with open(path, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        loaded = path.read_bytes()
        times.append((time.perf_counter() - t) * 1000)
        peak = max(peak, tracemalloc.get_traced_memory()[1] - base)
        assert len(loaded) == size
        del loaded
    return ["baseline: open/write/fsync + read_bytes", _size(size), median(times), peak / 1e6,
            peak / size]  # fmt: skip


def _size(n: int) -> str:
    return f"{n // (1 << 20)} MB" if n >= 1 << 20 else f"{n // 1024} KB"


async def bench_invoke(tmp: Path, calls: int) -> list[list[object]]:
    from codemode import Session, SubprocessExecutor
    from codemode.memory import Memory

    memory = Memory.from_workspace(tmp / "ws-invoke")
    await memory.skills.create("inc", "def run(x):\n    return x + 1", "add one")
    code = f"""
import time
def inc(x):
    return x + 1
n = {calls}
skills.inc(x=0)
t = time.perf_counter()
for _ in range(n): inc(x=1)
local = (time.perf_counter() - t) / n * 1e6
t = time.perf_counter()
for _ in range(n): skills.inc(x=1)
invoked = (time.perf_counter() - t) / n * 1e6
t = time.perf_counter()
for _ in range(n): tools.bench.noop()
tool = (time.perf_counter() - t) / n * 1e6
[local, invoked, tool]
"""
    async with Session(SubprocessExecutor(), memory=memory) as s:

        def noop() -> None:
            """Does nothing (round-trip floor)."""

        s.register_tool(noop, server="bench")
        r = await s.run(code, timeout=300)
        assert r.is_ok, r.to_text()
        local, invoked, tool = r.value  # type: ignore[misc]
    return [
        ["function defined in the session (baseline)", calls, local, 1.0],
        ["skills.inc(x=1) (one host round trip + cached module)", calls, invoked, invoked / local],
        ["tools.bench.noop() (host round trip, for reference)", calls, tool, tool / local],
    ]


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skills", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--big-mb", type=int, default=50)
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="cm-bench-mem-"))
    redis_server = None
    try:
        from redis_server import RedisServer

        if shutil.which("redis-server"):
            redis_server = RedisServer().start()
    except (ImportError, RuntimeError) as exc:
        print(f"(redis rows skipped: {exc})")
    try:
        stores: list[tuple[str, Callable[[str], Storage]]] = [
            ("file", lambda sub: FileStorage(tmp / sub))
        ]
        if redis_server is not None:
            from codemode.storage.redis import RedisStorage

            url = redis_server.url
            stores.append(("redis", lambda sub: RedisStorage(url, prefix=sub)))

        rows: list[list[object]] = []
        for label, make in stores:
            store = make("search")
            rows += await bench_search(store, label, args.skills, args.queries)
            await store.aclose()
        print(table(
            f"Skill search over {args.skills} skills ({args.queries} queries of 3 words, top 10)",
            ["what", "skills", "first ms", "after 1 new skill ms", "p50 ms", "p95 ms",
             "x baseline"], rows,
        ))  # fmt: skip

        tracemalloc.start()
        rows = []
        for size, repeat in ((1024, 200), (args.big_mb << 20, 3)):
            rows.append(file_baseline(tmp, size, repeat))
            for label, make in stores:
                store = make("arts")
                rows.append(
                    await bench_artifacts(store, f"{label}: artifacts.save+load", size, repeat)
                )
                await store.aclose()
        tracemalloc.stop()
        print(table(
            "Artifact save + load of random bytes (median; peak = Python allocations above "
            "the input, tracemalloc)",
            ["what", "size", "median ms", "peak MB", "peak / size"], rows,
        ))  # fmt: skip

        rows = await bench_invoke(tmp, args.calls)
        print(table(
            "skills.invoke overhead, measured inside a SubprocessExecutor worker (per call)",
            ["what", "calls", "us per call", "x baseline"], rows,
        ))  # fmt: skip
    finally:
        if redis_server is not None:
            redis_server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
