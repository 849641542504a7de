"""Checkpoints through RayExecutor: nothing Ray-specific, the worker protocol carries them.
A node killed mid-run costs only that run: the next run, on another node, has the
variables of the last completed run."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from codemode import FileStorage, Session
from codemode.checkpoint import Checkpoints

from .conftest import RayCluster
from .test_ray_executor import SLEEPS_AFTER_PROBE, executor, probe, worker_of

pytestmark = [pytest.mark.anyio, pytest.mark.ray]


async def test_a_node_killed_mid_run_costs_only_that_run_with_checkpoints(
    cluster: RayCluster, tmp_path: Path
) -> None:
    store = Checkpoints(FileStorage(tmp_path), "ray-session")
    async with Session(executor(cluster), checkpoints=store) as s:
        started = probe(s)
        await s.run("kept = 'before'\ndef twice(v): return 2 * v")
        victim = cluster.node_of(worker_of(s).node)
        run = asyncio.create_task(s.run("kept = 'lost'\n" + SLEEPS_AFTER_PROBE, 900))
        await asyncio.wait_for(started.wait(), 120)
        await asyncio.to_thread(cluster.add_node, f"spare{len(cluster.nodes)}")
        await asyncio.to_thread(victim.kill)
        r = await asyncio.wait_for(run, 180)
        assert r.state_lost
        assert any("restored from the checkpoint" in w for w in r.warnings)
        r = await s.run("kept, twice(21)")
        assert r.error is None and r.value == ["before", 42]
        assert worker_of(s).node != victim.node_id
