"""Issue 20 item 3: checkpoint and restore time of a session's namespace, 1 MB and 100 MB.

python benchmarks/bench_checkpoint.py [--executor sandbox|subprocess] [--storage file|redis]
                                      [--sizes 1,100] [--n 10] [--n-large 5] [--quick]

For each size and shape (``bytes``: one blob, as a file read into memory; ``objects``: a
list of small dicts, which pickle spends its time on), it times, median and p95:

- ``checkpoint``: ``Session.checkpoint()`` (pickle in the worker, send, store);
- ``restore``: ``Session.restore()`` into the running worker (read, send, unpickle);
- ``fresh start + restore``: a new ``Session`` on the same checkpoint up to its first
  result, against ``fresh start`` without a checkpoint measured in the same run.

Sizes are pickled sizes (the stored record), printed as measured.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "tests" / "storage"))
from _stats import median, pct, table
from codemode import Session, SubprocessExecutor
from codemode.checkpoint import Checkpoints
from codemode.execution.base import Executor
from codemode.storage import FileStorage, Storage

# Code that builds a namespace whose pickle is about ``mb`` MB.
SHAPES: dict[str, str] = {
    "bytes": "blob = bytes(range(256)) * ({mb} * 4096)\nnote = 'a blob'",
    "objects": (
        "rows = [{{'id': i, 'name': 'row%d' % i, 'score': i * 0.5, 'tags': ['a', 'b']}} "
        "for i in range({mb} * 23000)]\ndef total(): return sum(r['score'] for r in rows)"
    ),
}


def executor_factory(name: str) -> Callable[[], Executor]:
    if name == "subprocess":
        return lambda: SubprocessExecutor(memory_limit_mb=4096, start_timeout=120)
    from codemode.execution.sandbox import SandboxExecutor

    workspace = tempfile.mkdtemp(prefix="cm-bench-ckpt-", dir="/var/tmp")
    return lambda: SandboxExecutor(
        workspace=workspace, pool_size=0, memory_limit_mb=4096, start_timeout=120
    )


@asynccontextmanager
async def open_storage(kind: str) -> AsyncIterator[Storage]:
    if kind == "file":
        with tempfile.TemporaryDirectory(prefix="cm-bench-ckpt-") as d:
            yield FileStorage(d)
        return
    from redis_server import RedisServer

    from codemode.storage.redis import RedisStorage

    with RedisServer() as server:
        store = RedisStorage(server.url, prefix="bench")
        try:
            yield store
        finally:
            await store.aclose()


async def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    await fn()
    return (time.perf_counter() - t0) * 1000


async def measure(
    new_executor: Callable[[], Executor], storage: Storage, shape: str, mb: int, n: int
) -> dict[str, Any]:
    key = f"{shape}-{mb}"
    store = Checkpoints(storage, key, auto=False, max_bytes=1 << 30)
    ckpt: list[float] = []
    restore: list[float] = []
    async with Session(new_executor(), checkpoints=store) as s:
        r = await s.run(SHAPES[shape].format(mb=mb), timeout=600)
        assert r.error is None, r.error
        for _ in range(n):
            ckpt.append(await timed(s.checkpoint))
            restore.append(await timed(s.restore))
        info = await s.checkpoint()
        check = "total()" if shape == "objects" else "len(blob)"
        expected = (await s.run(check)).value
    fresh: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        async with Session(new_executor(), checkpoints=store) as s2:
            got = (await s2.run(check)).value
            fresh.append((time.perf_counter() - t0) * 1000)
        assert got == expected, (got, expected)
    return {
        "shape": shape,
        "mb": info.size / 2**20,
        "ckpt": ckpt,
        "restore": restore,
        "fresh": fresh,
    }


async def baseline_start(new_executor: Callable[[], Executor], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        async with Session(new_executor()) as s:
            await s.run("1")
            out.append((time.perf_counter() - t0) * 1000)
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--executor", choices=["sandbox", "subprocess"], default="sandbox")
    ap.add_argument("--storage", choices=["file", "redis"], default="file")
    ap.add_argument("--sizes", default="1,100", help="namespace sizes in MB, comma-separated")
    ap.add_argument("--n", type=int, default=10, help="repetitions for sizes under 10 MB")
    ap.add_argument("--n-large", type=int, default=5, help="repetitions for larger sizes")
    ap.add_argument("--quick", action="store_true", help="1 MB only, 2 repetitions (CI)")
    args = ap.parse_args()
    sizes = [1] if args.quick else [int(x) for x in args.sizes.split(",")]
    n_small, n_large = (2, 2) if args.quick else (args.n, args.n_large)
    new_executor = executor_factory(args.executor)
    print(
        f"executor={args.executor} storage={args.storage} python={sys.version.split()[0]} "
        f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.2f}"
    )
    await baseline_start(new_executor, 2)  # warm-up: first imports, first sandbox
    base = await baseline_start(new_executor, n_small)
    rows = []
    async with open_storage(args.storage) as storage:
        for mb in sizes:
            for shape in SHAPES:
                n = n_small if mb < 10 else n_large
                m = await measure(new_executor, storage, shape, mb, n)
                rows.append(
                    [
                        m["shape"],
                        f"{m['mb']:.1f}",
                        n,
                        median(m["ckpt"]),
                        pct(m["ckpt"], 95),
                        median(m["restore"]),
                        pct(m["restore"], 95),
                        median(m["fresh"]),
                        pct(m["fresh"], 95),
                        f"{median(m['fresh']) / median(base):.1f}x",
                    ]
                )
    headers = [
        "shape",
        "MB",
        "n",
        "checkpoint p50",
        "p95",
        "restore p50",
        "p95",
        "fresh start+restore p50",
        "p95",
        "vs fresh start",
    ]
    print(table(f"checkpoint / restore, ms ({args.executor}, {args.storage})", headers, rows))
    print(
        f"fresh start without a checkpoint (same run): p50 {median(base):.1f} ms, "
        f"p95 {pct(base, 95):.1f} ms; load average now {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
