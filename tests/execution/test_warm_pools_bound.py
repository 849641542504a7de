"""Warm pools are kept for a bounded number of launch configurations: a process opening
sessions on many workspaces in turn kept every one's pre-started workers (processes and
their pipes) until it exited, and ran out of file descriptors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codemode import Session, SubprocessExecutor
from codemode.execution import pool
from codemode.execution.spawn import Spawned

pytestmark = pytest.mark.anyio


def _workers_in(root: Path) -> dict[int, str]:
    """Live child processes of this one whose working directory is under ``root``."""
    found: dict[int, str] = {}
    for tid in os.listdir(f"/proc/{os.getpid()}/task"):
        with open(f"/proc/{os.getpid()}/task/{tid}/children") as fh:
            pids = [int(p) for p in fh.read().split()]
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                        continue  # ended, not yet reaped
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if cwd.startswith(str(root)):
                found[pid] = os.path.basename(cwd)
    return found


async def test_sessions_on_many_workspaces_keep_a_bounded_number_of_warm_pools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool, "MAX_WARM_POOLS", 4)
    extra = 4
    for i in range(pool.MAX_WARM_POOLS + extra):
        cwd = tmp_path / f"ws{i}"
        cwd.mkdir()
        executor = SubprocessExecutor(cwd=str(cwd), pool_size=1)
        async with Session(executor) as s:
            assert (await s.run("print(1)")).stdout == "1\n"
        await executor.warm()  # its pool full again, as a refill leaves it
    kept = set(_workers_in(tmp_path).values())
    # the least recently used workspaces' workers are stopped; the latest ones stay warm
    assert not kept & {f"ws{i}" for i in range(extra)}, sorted(kept)
    assert f"ws{pool.MAX_WARM_POOLS + extra - 1}" in kept


async def test_a_retired_pool_starts_no_worker() -> None:
    started: list[bool] = []

    def spawn(*, background: bool) -> Spawned:
        started.append(background)
        raise OSError("not needed")

    p = pool.WorkerPool(spawn, 2)
    p.retired = True
    p.refill()
    assert started == []
