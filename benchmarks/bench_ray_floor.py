"""Issue 20, where a Ray run's time goes: Ray's own per-call floor under the options that
can be set per actor, and a run through the session actor against the former shape.

1. A no-op actor call (40 bytes in, the same out), rounds alternating between actor
   shapes: an ``async`` actor (Ray hands each call to the actor's event-loop thread) or
   a plain one; Ray's task events on (Ray's default) or off (``enable_task_events``);
   awaited on the host's event loop, as ``RayWorker`` does.
2. ``run("x+1")`` through ``SessionActor`` over its direct link (the default) and over
   Ray calls only (``ray.direct`` false: the link down), against the same session logic
   in an ``async`` actor, and the local sandbox, in one run.

Without ``--address`` it starts its own cluster on this machine (a head and one worker
node offering the ``codemode`` resource). Numbers measured at load > 3 are noise: the
script prints the load before and after.

python benchmarks/bench_ray_floor.py [--address HOST:PORT] [--calls 1800] [--rounds 9]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _ray_cluster import ray_cluster
from _stats import median, pct, table
from codemode import Session
from codemode.cluster import RayConfig, RayExecutor
from codemode.cluster.actor import SessionActor, _Session, unpack
from codemode.execution.sandbox import SandboxExecutor

CODE = "x = 1\nx + 1"


class AsyncNoop:
    async def noop(self, data: bytes) -> bytes:
        return data


class PlainNoop:
    def noop(self, data: bytes) -> bytes:
        return data


class FormerAsyncActor:
    """The session actor's logic in an ``async`` actor (Ray calls only), as it was before
    the plain one."""

    def __init__(self, kind: str, options: dict[str, Any]) -> None:
        self._session = _Session(kind, options, lambda: None)

    def hello(self) -> dict[str, Any]:
        return SessionActor.hello(self)  # type: ignore[arg-type]

    async def start(self) -> int:
        return await self._session.start()

    async def run(self, request: bytes) -> Any:
        return await self._session.run(*unpack(request))

    async def poll(self, request: bytes) -> Any:
        return await self._session.poll(*unpack(request))

    def reply(self, answer: bytes) -> None:
        self._session.reply(*unpack(answer))

    def pid(self) -> int:
        return self._session.pid()

    def interrupt(self, run_id: bytes, kill_stuck: bool) -> bool:
        return self._session.interrupt(run_id, kill_stuck)

    def kill(self) -> None:
        self._session.kill()

    async def close(self) -> None:
        await self._session.close()


async def floors(calls: int, rounds: int) -> dict[str, list[float]]:
    import ray

    where = {"num_cpus": 0.01, "resources": {"codemode": 0.01}}
    actors = {
        f"{shape}, task events {'on' if events else 'off'}": ray.remote(cls)
        .options(**where, enable_task_events=events)
        .remote()
        for shape, cls in (("async actor", AsyncNoop), ("plain actor", PlainNoop))
        for events in (True, False)
    }
    data = b"x" * 40
    for handle in actors.values():
        await handle.noop.remote(data)
    out: dict[str, list[float]] = {name: [] for name in actors}
    for _ in range(rounds):
        for name, handle in actors.items():
            for _ in range(calls // rounds):
                t = time.perf_counter()
                await handle.noop.remote(data)
                out[name].append((time.perf_counter() - t) * 1000)
    for handle in actors.values():
        ray.kill(handle)
    return out


def _executor(address: str, direct: bool = True) -> RayExecutor:
    config = RayConfig(
        address=address,
        resources={"codemode": 0.01},
        memory_mb=200,
        start_timeout=600,
        direct=direct,
    )
    return RayExecutor(config, pool_size=0, worker_start_timeout=60)


async def runs(address: str, n: int, rounds: int) -> dict[str, list[float]]:
    import ray

    former = _executor(address, direct=False)
    former._actor_cls = ray.remote(FormerAsyncActor)
    sessions = {
        "sandbox (local)": Session(SandboxExecutor(pool_size=0)),
        "ray: SessionActor, direct link": Session(_executor(address)),
        "ray: SessionActor, Ray calls only": Session(_executor(address, direct=False)),
        "ray: async actor, Ray calls only": Session(former),
    }
    out: dict[str, list[float]] = {name: [] for name in sessions}
    try:
        for s in sessions.values():
            await s.start()
            for _ in range(20):
                assert (await s.run(CODE)).error is None
        for _ in range(rounds):
            for name, s in sessions.items():
                for _ in range(n // rounds):
                    t = time.perf_counter()
                    await s.run(CODE)
                    out[name].append((time.perf_counter() - t) * 1000)
    finally:
        for s in sessions.values():
            await s.close()
    return out


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


async def main_async(args: argparse.Namespace, address: str) -> None:
    import ray

    ray.init(address=address, namespace="codemode", logging_level="ERROR", log_to_driver=False)
    print(f"machine: {os.cpu_count()} cores, load average {_load()}")
    f = await floors(args.calls, args.rounds)
    rows = [[name, len(v), median(v), pct(v, 95)] for name, v in f.items()]
    print(table("no-op actor call, awaited (ms)", ["actor", "calls", "p50", "p95"], rows))
    r = await runs(address, args.calls, args.rounds)
    base = median(r["sandbox (local)"])
    rows = [[name, len(v), median(v), pct(v, 95), median(v) - base] for name, v in r.items()]
    print(table('run("x+1") (ms)', ["executor", "runs", "p50", "p95", "added p50"], rows))
    print(f"after: load average {_load()}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--address", help="an existing cluster (default: start one here)")
    p.add_argument("--calls", type=int, default=1800)
    p.add_argument("--rounds", type=int, default=9)
    args = p.parse_args()
    with ray_cluster(args.address) as (address, _):
        asyncio.run(main_async(args, address))


if __name__ == "__main__":
    main()
