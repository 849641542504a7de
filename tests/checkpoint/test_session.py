"""Checkpoints end to end: a real sandboxed worker, a real SIGKILL, files and real Redis."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import anyio
import pytest

from codemode import Session, SubprocessExecutor
from codemode.checkpoint import Checkpoints
from codemode.checkpoint.store import KIND
from codemode.errors import CheckpointError
from codemode.execution.sandbox import SandboxExecutor
from codemode.storage import FileStorage, Storage

pytestmark = pytest.mark.anyio


def _descendants(pid: int) -> list[int]:
    kids: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            kids.append(int(entry))
    return [d for k in kids for d in (*_descendants(k), k)]


def kill_worker(session: Session) -> None:
    """SIGKILL the worker process (and the sandbox's processes around it), from outside."""
    worker = session._worker
    assert worker is not None
    pid = int(worker.pid)  # type: ignore[attr-defined]
    for p in (*_descendants(pid), pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)


async def _dead(session: Session) -> None:
    with anyio.fail_after(10):
        while session._worker is not None and session._worker.alive:
            await anyio.sleep(0.02)


async def test_a_killed_sandbox_worker_costs_only_the_last_run(
    storage: Storage, workspace: str
) -> None:
    store = Checkpoints(storage, "agent-1")
    async with Session(SandboxExecutor(workspace=workspace, pool_size=0), checkpoints=store) as s:
        await s.run("import json\ntotal = 41\ndef bump(v): return v + total")
    async with Session(SandboxExecutor(workspace=workspace, pool_size=0), checkpoints=store) as s:
        assert (await s.run("bump(1)")).value == 42  # resumed from the first session
        results = []

        async def long_run() -> None:
            results.append(await s.run("total = 1000\nimport time\ntime.sleep(60)", timeout=120))

        async with anyio.create_task_group() as tg:
            tg.start_soon(long_run)
            await anyio.sleep(1.0)
            kill_worker(s)
        (lost,) = results
        assert lost.state_lost
        assert any("restored from the checkpoint" in w for w in lost.warnings)
        after = await s.run("bump(1), json.dumps(total)")
        assert after.value == [42, "41"]  # the variables of the last completed run


async def test_a_worker_killed_between_runs_comes_back_with_its_variables(
    storage: Storage,
) -> None:
    async with Session(SubprocessExecutor(), checkpoints=Checkpoints(storage, "a")) as s:
        await s.run("import threading\nrows = [1, 2, 3]\nlock = threading.Lock()")
        kill_worker(s)
        await _dead(s)
        r = await s.run("sum(rows)")
        assert r.value == 6
        (warning,) = [w for w in r.warnings if "restarted" in w]
        assert "restored" in warning and "lock" in warning  # lock could not be saved
        assert (await s.run("'lock' in globals()")).value is False


async def test_without_checkpoints_a_killed_worker_still_loses_its_state() -> None:
    async with Session(SubprocessExecutor()) as s:
        await s.run("x = 1")
        kill_worker(s)
        await _dead(s)
        r = await s.run("x")
        assert r.error is not None and r.error.type == "NameError"
        assert any("state was lost" in w for w in r.warnings)


async def test_an_evicted_session_resumes_later_in_another_session(storage: Storage) -> None:
    async with Session(SubprocessExecutor(), checkpoints=Checkpoints(storage, "k")) as s:
        await s.run("class Acc:\n    def __init__(self): self.n = 0\nacc = Acc()\nacc.n += 5")
    async with Session(SubprocessExecutor(), checkpoints=Checkpoints(storage, "k")) as s:
        r = await s.run("acc.n += 1\nacc.n")
        assert r.value == 6
        assert any("resumed" in w for w in r.warnings)


async def test_on_demand_checkpoint_lists_what_cannot_be_saved(storage: Storage) -> None:
    store = Checkpoints(storage, "od", auto=False)
    async with Session(SubprocessExecutor(), checkpoints=store) as s:
        await s.run("x = 1\nf = open('/dev/null')")
        info = await s.checkpoint()
        assert info.names == ("x",)
        assert "f" in info.skipped and "TextIOWrapper" in info.skipped["f"]
        await s.run("x = 2")
        await s.restore()
        assert (await s.run("x")).value == 1


async def test_auto_off_saves_nothing_until_asked(storage: Storage) -> None:
    store = Checkpoints(storage, "manual", auto=False)
    async with Session(SubprocessExecutor(), checkpoints=store) as s:
        await s.run("x = 1")
        assert await store.info() is None
        with pytest.raises(CheckpointError, match="no checkpoint is stored"):
            await s.restore()


async def test_a_checkpoint_over_the_limit_is_a_clear_error_and_nothing_is_replaced(
    storage: Storage,
) -> None:
    store = Checkpoints(storage, "big", max_bytes=1 << 20)
    async with Session(SubprocessExecutor(), checkpoints=store) as s:
        await s.run("small = 'ok'")
        r = await s.run("blob = b'x' * (2 << 20)")
        assert any("over the limit of 1,048,576" in w for w in r.warnings)
        with pytest.raises(CheckpointError, match=r"checkpoint\.max_mb"):
            await s.checkpoint()
        info = await store.info()
        assert info is not None and info.names == ("small",)


async def test_the_host_refuses_an_oversized_checkpoint_the_worker_sends_itself(
    tmp_path: Path,
) -> None:
    store = Checkpoints(FileStorage(tmp_path), "forged", max_bytes=1 << 20)
    async with Session(SubprocessExecutor(), checkpoints=store) as s:
        r = await s.run(
            "from codemode_worker import bridge\n"
            "bridge.call('checkpoint.save', {'data': b'x' * (2 << 20), 'names': [], "
            "'skipped': {}, 'python': '3'})"
        )
        assert r.error is not None and "over the limit" in r.error.message
        assert await store.info() is not None  # the auto checkpoint after that run


async def test_the_host_stores_opaque_bytes_and_never_unpickles_them(tmp_path: Path) -> None:
    """A worker may send anything: the host stores it as is; only a worker loads it."""
    store = Checkpoints(FileStorage(tmp_path), "opaque", auto=False)
    async with Session(SubprocessExecutor(), checkpoints=store) as s:
        evil = "cos\nsystem\n(S'touch /tmp/cm-pwned'\ntR."  # a pickle that runs a command
        await s.run(
            "from codemode_worker import bridge\n"
            f"bridge.call('checkpoint.save', {{'data': {evil!r}.encode(), 'names': ['x'], "
            "'skipped': {}, 'python': '3'})"
        )
        assert await store.read() == evil.encode()
        with pytest.raises(CheckpointError, match="not a codemode checkpoint"):
            await s.restore()


async def test_tenants_and_keys_get_separate_checkpoints(storage: Storage) -> None:
    a = Checkpoints(storage, "same-key", tenant="acme")
    b = Checkpoints(storage, "same-key", tenant="globex")
    assert a.name != b.name and a.name.startswith("acme@") and b.name.startswith("globex@")
    async with Session(SubprocessExecutor(), checkpoints=a) as s:
        await s.run("secret = 'acme'")
    async with Session(SubprocessExecutor(), checkpoints=b) as s:
        r = await s.run("secret")
        assert r.error is not None and r.error.type == "NameError"
        # the code cannot name another slot: checkpoint.load takes no parameters
        r = await s.run(
            "from codemode_worker import bridge\nbridge.call('checkpoint.load', {'name': "
            f"{a.name!r}}})"
        )
        assert r.error is not None and "unexpected argument 'name'" in r.error.message


async def test_reset_forgets_the_checkpoint_too(storage: Storage) -> None:
    store = Checkpoints(storage, "r")
    async with Session(SubprocessExecutor(), checkpoints=store) as s:
        await s.run("x = 1")
        await s.reset()
        assert await store.info() is None
        kill_worker(s)
        await _dead(s)
        r = await s.run("x")
        assert r.error is not None and r.error.type == "NameError"


async def test_the_workspace_config_turns_auto_checkpoints_on(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"checkpoint": {"auto": True}}))
    async with Session.from_base(tmp_path, executor=SubprocessExecutor()) as s:
        assert s.checkpoints is not None and s.checkpoints.max_bytes == 256 << 20
        await s.run("kept = [1, 2]")
        kill_worker(s)
        await _dead(s)
        assert (await s.run("kept")).value == [1, 2]
    assert list((tmp_path / KIND).iterdir())


async def test_a_misspelt_checkpoint_setting_is_an_error(tmp_path: Path) -> None:
    from codemode.errors import ConfigError

    (tmp_path / "config.json").write_text(json.dumps({"checkpoint": {"autp": True}}))
    with pytest.raises(ConfigError, match="autp"):
        Session.from_base(tmp_path, executor=SubprocessExecutor())


async def test_checkpoints_of_sessions_that_never_came_back_are_swept(storage: Storage) -> None:
    old = Checkpoints(storage, "old", tenant="acme")
    await old.write(b"CMCKPT1\n{}\n", [], {}, "3")
    other_tenant = Checkpoints(storage, "old", tenant="globex")
    await other_tenant.write(b"x", [], {}, "3")
    fresh = Checkpoints(storage, "new", tenant="acme", keep_seconds=0.0)
    async with Session(SubprocessExecutor(), checkpoints=fresh) as s:
        await s.run("x = 1")
    assert await old.info() is None  # acme's stale checkpoint is gone
    assert await other_tenant.info() is not None  # another tenant's is not touched
    assert await fresh.info() is not None


async def test_a_namespace_of_many_long_names_is_saved_and_counted(storage: Storage) -> None:
    store = Checkpoints(storage, "many")
    async with Session(SubprocessExecutor(), checkpoints=store) as s:
        r = await s.run("for i in range(5000):\n    globals()['v' * 40 + str(i)] = i")
        assert r.error is None and not r.warnings, r.warnings
    info = await store.info()
    assert info is not None and info.count == 5001  # the 5000 names and the loop's i
    assert 0 < len(info.names) < info.count  # the listing is cut to fit the metadata
    async with Session(SubprocessExecutor(), checkpoints=store) as s:
        r = await s.run("globals()['v' * 40 + '4999']")
        assert r.value == 4999
        assert any("5001 variables were restored" in w for w in r.warnings)
