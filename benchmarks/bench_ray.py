"""Issue 20 figures: what a session on Ray costs, against the local sandbox in one run.

1. Warm ``run("x+1")`` p50/p95: RayExecutor (worker in an actor on another node, every run
   one exchange over the direct link to the actor) vs the same with Ray actor calls only
   (``ray.direct`` false: what a run costs while the link is down) vs SandboxExecutor (the
   same worker, local pipes); rounds alternate. Target: <= 1 ms added p50.
2. A tool call from the code (``tools.bench.echo(x=1)``), served on the host: Ray vs local.
3. Session start: RayExecutor.start (actor placed, worker started on its node, versions
   checked) vs a cold local sandbox start (no warm pool).
4. Throughput: ``--sessions`` (100) concurrent sessions, each running ``x + 1`` in a loop
   for ``--seconds``, on one worker node, then on two (sessions spread over them): runs/s
   and the scaling ratio. On one machine both nodes share its cores with the host
   process, so the ratio says what the relay costs, not what a second machine would add.

Without ``--address`` it starts its own cluster on this machine (a head plus one worker
node, then a second: ``codemode.cluster.local``) and stops it after; with ``--address``
the throughput is measured on that cluster as it is (no scaling ratio).

python benchmarks/bench_ray.py [--quick] [--address HOST:PORT] [--runs 300] [--starts 10]
       [--sessions 100] [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _ray_cluster import ray_cluster
from _stats import median, pct, table
from codemode import Session
from codemode.cluster import RayConfig, RayExecutor
from codemode.cluster.local import LocalCluster
from codemode.errors import ExecutorError
from codemode.execution.sandbox import SandboxExecutor

TARGET_ADDED_P50_MS = 1.0


async def _no_calls(method: str, params: dict[str, Any]) -> Any:
    raise RuntimeError(method)


def echo(x: int) -> int:
    """Returns x."""
    return x


def _ray_executor(
    address: str, pool_size: int = 0, memory_mb: int = 200, **config: Any
) -> RayExecutor:
    settings = RayConfig(
        address=address,
        resources={"codemode": 0.01},
        memory_mb=memory_mb,
        start_timeout=600,
        **config,
    )
    return RayExecutor(settings, pool_size=pool_size, worker_start_timeout=60)


STARTS_AT_ONCE = 8
"""Sessions started side by side (as ``serve`` caps them): all at once, each start is
slower, and on a small loaded machine some miss their start timeout."""


async def throughput(address: str, sessions: int, seconds: float) -> dict[str, Any]:
    """``sessions`` sessions running ``x + 1`` back to back for ``seconds``: runs/s."""
    # Placement reserves little memory here: the bench measures the relay, not the limit.
    ex = _ray_executor(address, memory_mb=64)
    group = [Session(ex) for _ in range(sessions)]
    gate = asyncio.Semaphore(STARTS_AT_ONCE)

    async def start(s: Session) -> None:
        async with gate:
            await s.start()

    t = time.perf_counter()
    try:
        await asyncio.gather(*(start(s) for s in group))
        started = time.perf_counter() - t
        await asyncio.gather(*(s.run("x = 1") for s in group))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        counts = [0] * sessions
        errors = 0

        async def drive(i: int, s: Session) -> None:
            nonlocal errors
            while loop.time() < deadline:
                r = await s.run("x + 1")
                counts[i] += 1
                errors += r.error is not None

        t, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(drive(i, s) for i, s in enumerate(group)))
        elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
        nodes = {str(getattr(s._worker, "node", "")) for s in group}
    finally:
        await asyncio.gather(*(s.close() for s in group), return_exceptions=True)
    return {
        "runs/s": sum(counts) / elapsed,
        "host_cpu_ms": cpu * 1000 / max(sum(counts), 1),
        "runs": sum(counts),
        "errors": errors,
        "nodes": len(nodes),
        "start_s": started,
        "load": _load(),
    }


FLOOR = "ray actor call alone (no-op)"
NO_LINK = "ray, Ray calls only (ray.direct false)"


async def warm_runs(address: str, runs: int, rounds: int, code: str) -> dict[str, list[float]]:
    """Rounds alternate between the executors; each Ray session's actor also answers a
    no-op call (``pid``) in its round: Ray's own floor for that actor's options."""
    sessions = {
        "sandbox": Session(SandboxExecutor(pool_size=0)),
        "ray": Session(_ray_executor(address)),
        # Every run as Ray actor calls, as when the direct link is off or broken.
        NO_LINK: Session(_ray_executor(address, direct=False)),
    }
    out: dict[str, list[float]] = {}
    try:
        for s in sessions.values():
            await s.start()
            s.register_tool(echo, server="bench")
            for _ in range(20):  # warm-up: imports, first tool listing
                r = await s.run(code)
                assert r.error is None, r.error
        for _ in range(rounds):
            for name, s in sessions.items():
                for _ in range(runs // rounds):
                    t = time.perf_counter()
                    await s.run(code)
                    out.setdefault(name, []).append((time.perf_counter() - t) * 1000)
                handle: Any = getattr(s._worker, "_handle", None)
                if handle is None:
                    continue
                if name != "ray":
                    continue
                for _ in range(runs // rounds):  # what one Ray round trip costs by itself
                    t = time.perf_counter()
                    await handle.pid.remote()
                    out.setdefault(FLOOR, []).append((time.perf_counter() - t) * 1000)
        rss = actor_rss_mb()
        if rss:
            print(f"session actor processes: {len(rss)}, resident {median(rss):.0f} MB each (p50)")
    finally:
        for s in sessions.values():
            await s.close()
    return out


async def starts(address: str, n: int) -> dict[str, list[float]]:
    """Cold starts, and starts from a full pool (refilled, untimed, between starts)."""
    exs: dict[str, Any] = {
        "sandbox (cold, no pool)": SandboxExecutor(pool_size=0),
        "ray (actor placed + worker started)": _ray_executor(address),
        "ray (a ready actor from the pool)": _ray_executor(address, pool_size=1),
    }
    out: dict[str, list[float]] = {name: [] for name in exs}
    for ex in exs.values():  # the first start pays one-off checks and imports
        await (await ex.start(_no_calls)).close()
    for _ in range(n):
        for name, ex in exs.items():
            if isinstance(ex, RayExecutor):
                await ex.warm()
            t = time.perf_counter()
            w = await ex.start(_no_calls)
            out[name].append((time.perf_counter() - t) * 1000)
            await w.close()
    for ex in exs.values():
        if isinstance(ex, RayExecutor):
            ex.close()
    return out


def actor_rss_mb() -> list[float]:
    """Resident memory of the session actors' processes on this machine (local cluster)."""
    out = subprocess.run(["ps", "-eo", "rss,args"], capture_output=True, text=True).stdout
    return [int(line.split()[0]) / 1024 for line in out.splitlines()[1:]
            if "ray::SessionActor" in line]  # fmt: skip


def _load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


async def main_async(args: argparse.Namespace, address: str) -> None:
    print(f"machine: {os.cpu_count()} cores, {_load()}; Ray cluster at {address}")
    runs = await warm_runs(address, args.runs, args.rounds, "x = 1\nx + 1")
    rows = [[name, len(v), median(v), pct(v, 95)] for name, v in runs.items()]
    added = median(runs["ray"]) - median(runs["sandbox"])
    floor = median(runs[FLOOR])
    print(table('warm run("x+1") (ms)', ["executor", "runs", "p50", "p95"], rows))
    verdict = "met" if added <= TARGET_ADDED_P50_MS else "NOT met"
    print(f"added p50 by Ray: {added:.3f} ms (target <= {TARGET_ADDED_P50_MS} ms: {verdict}); "
          f"one Ray actor call alone: {floor:.3f} ms (runs go over the direct link)")  # fmt: skip
    no_link = median(runs[NO_LINK]) - median(runs["sandbox"])
    print(f"added p50 with Ray calls only (ray.direct false, or the link down): {no_link:.3f} ms, "
          f"{no_link - floor:.3f} ms above Ray's floor")  # fmt: skip

    calls = await warm_runs(address, args.runs // 2, args.rounds, "tools.bench.echo(x=1)")
    rows = [[name, len(v), median(v), pct(v, 95)] for name, v in calls.items()]
    print(table("run with one tool call served on the host (ms)", ["executor", "runs",
                "p50", "p95"], rows))  # fmt: skip
    added = median(calls["ray"]) - median(calls["sandbox"])
    no_link = median(calls[NO_LINK]) - median(calls["sandbox"])
    print(f"added p50 by Ray for a run with one tool call: {added:.3f} ms (no target); "
          f"with Ray calls only: {no_link:.3f} ms")  # fmt: skip

    st = await starts(address, args.starts)
    rows = [[name, len(v), median(v), pct(v, 95)] for name, v in st.items()]
    print(table("session start (ms)", ["executor", "starts", "p50", "p95"], rows))
    print(f"after: {_load()}")


def scaling(args: argparse.Namespace, address: str, cluster: LocalCluster | None) -> None:
    """Throughput on one worker node, then (own cluster only) on two. Each round's row is
    printed as soon as it ends, so a later round that fails leaves the earlier figures."""
    runs: list[tuple[str, dict[str, Any]]] = []
    headers = ["cluster", "runs", "runs/s", "host CPU ms/run", "nodes used", "errors",
               "start all (s)", "during"]  # fmt: skip
    title = f"throughput: {args.sessions} concurrent sessions, x + 1 back to back"

    def measure(label: str) -> bool:
        try:
            r = asyncio.run(throughput(address, args.sessions, args.seconds))
        except ExecutorError as exc:
            print(f"{title}, {label}: FAILED ({exc}; {_load()})")
            return False
        runs.append((label, r))
        row = [label, r["runs"], r["runs/s"], r["host_cpu_ms"], r["nodes"], r["errors"],
               r["start_s"], r["load"]]  # fmt: skip
        print(table(f"{title} ({args.seconds:g} s), {label}", headers, [row]))
        return True

    ok = measure("1 worker node" if cluster is not None else "the given cluster")
    if ok and cluster is not None:
        t = time.perf_counter()
        cluster.add_node("c")
        print(f"second worker node started in {time.perf_counter() - t:.1f} s")
        measure("2 worker nodes")
    if not runs:
        return
    cpu = median([r["host_cpu_ms"] for _, r in runs])
    print(f"the host process (one event loop) relays at most ~{1000 / cpu:.0f} runs/s per core "
          f"at {cpu:.2f} ms of its CPU per run")  # fmt: skip
    if len(runs) == 2:
        ratio = runs[1][1]["runs/s"] / runs[0][1]["runs/s"]
        print(f"scaling ratio 2 nodes / 1 node: {ratio:.2f} (on {os.cpu_count()} cores shared "
              "by the host, both nodes and their actors: docs/ray.md, capacity model)")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few runs (CI)")
    p.add_argument("--address", help="an existing cluster (default: start one here)")
    p.add_argument("--runs", type=int, default=600)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--starts", type=int, default=10)
    p.add_argument("--sessions", type=int, default=100)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--only", choices=["latency", "throughput"], help="run one part")
    args = p.parse_args()
    if args.quick:
        args.runs, args.rounds, args.starts = 60, 2, 2
        args.sessions, args.seconds = 4, 2.0
    with ray_cluster(args.address) as (address, cluster):
        if args.only != "throughput":
            asyncio.run(main_async(args, address))
        if args.only != "latency":
            scaling(args, address, cluster)


if __name__ == "__main__":
    main()
