"""Issue 18 figure: overhead of the metrics layers on a run_code that makes 5 tool calls.

Two sessions on real subprocess workers, one with the observe-stage layers (Prometheus
metrics) and one without, run the same cell alternately in the same process, so drift of
the machine hits both alike. The tool is an in-process Python function returning a small
record: the cheapest tool there is, so the relative overhead shown is an upper bound.

python benchmarks/bench_observability.py [--n 400] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _stats import median, pct, table
from codemode import Session, SubprocessExecutor, ToolRegistry
from codemode.observability import Metrics

CELL = "\n".join(f"r{i} = tools.crm.lookup(customer_id={i})" for i in range(5)) + "\nr4['tier']"


def lookup(customer_id: int) -> dict[str, Any]:
    """One customer's record."""
    return {"id": customer_id, "name": f"customer {customer_id}", "tier": "gold"}


async def open_session(metrics: Metrics | None) -> Session:
    reg = ToolRegistry()
    reg.register(lookup, server="crm")
    session = Session(SubprocessExecutor(), tools=reg)
    if metrics is not None:
        reg.use(metrics.tool_layer, "observe")
        session.use(metrics.run_hook, "observe")
    await session.start()
    return session


async def main(n: int) -> None:
    metrics = Metrics()
    sessions = {"off": await open_session(None), "metrics": await open_session(metrics)}
    times: dict[str, list[float]] = {k: [] for k in sessions}
    try:
        for s in sessions.values():  # warm up both (imports, first calls)
            for _ in range(20):
                assert (await s.run(CELL)).value == "gold"
        for i in range(n):
            order = list(sessions.items())
            if i % 2:
                order.reverse()
            for name, s in order:
                t = time.perf_counter()
                r = await s.run(CELL)
                times[name].append(time.perf_counter() - t)
                assert r.value == "gold", r
    finally:
        for s in sessions.values():
            await s.close()
    base = median(times["off"])
    rows = [
        [
            name,
            len(ts),
            median(ts) * 1e3,
            pct(ts, 95) * 1e3,
            f"{(median(ts) / base - 1) * 100:+.2f}%",
        ]
        for name, ts in times.items()
    ]
    print(
        table(
            "run_code with 5 tool calls (ms; overhead = median vs off, same run)",
            ["layers", "runs", "median", "p95", "overhead"],
            rows,
        )
    )
    # The layers' own cost, without the worker round trip around it.
    reg = ToolRegistry()
    reg.register(lookup, server="crm")
    bare = ToolRegistry()
    bare.register(lookup, server="crm")
    reg.use(Metrics(process=False).tool_layer, "observe")
    calls = 200 if n < 100 else 5000
    per: dict[str, float] = {}
    for name, r in (("off", bare), ("metrics", reg)):
        t = time.perf_counter()
        for i in range(calls):
            await r.call("crm", "lookup", {"customer_id": i})
        per[name] = (time.perf_counter() - t) / calls * 1e6
    print(
        table(
            "one direct tool call through the chain (µs)",
            ["layers", "calls", "mean µs", "added µs"],
            [[k, calls, v, v - per["off"]] for k, v in per.items()],
        )
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400, help="runs per configuration")
    ap.add_argument("--quick", action="store_true", help="a few runs (CI)")
    args = ap.parse_args()
    asyncio.run(main(10 if args.quick else args.n))
