"""Disk and inode quotas: /workspace, and the memory (artifacts, state, skills) on the host."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from codemode import Session
from codemode.errors import QuotaExceeded, StorageUnavailable
from codemode.execution import executor_by_name
from codemode.execution.limits import Limits
from codemode.execution.sandbox import SandboxExecutor
from codemode.memory import Memory
from codemode.memory.artifacts import Artifacts
from codemode.memory.state import State
from codemode.storage import FileStorage
from codemode.storage.quota import QuotaStorage
from codemode.workspace import Workspace

from .conftest import SUITE_LIMITS

pytestmark = [pytest.mark.anyio, pytest.mark.security]

MB = 1 << 20


def _du(path: str) -> tuple[int, int]:
    total = files = 0
    for root, dirs, names in os.walk(path):
        for n in dirs + names:
            files += 1
            total += os.lstat(os.path.join(root, n)).st_blocks * 512
    return total, files


@pytest.fixture
async def small_ws(tmp_path: Path) -> AsyncIterator[tuple[Session, str]]:
    ws = str(tmp_path / "ws")
    os.mkdir(ws)
    limits = Limits(**{**SUITE_LIMITS.__dict__, "workspace_mb": 16, "workspace_files": 500})
    async with Session(SandboxExecutor(workspace=ws, limits=limits, pool_size=0)) as s:
        yield s, ws


# -- /workspace --------------------------------------------------------------------------


async def test_a_run_that_keeps_writing_is_stopped_at_the_byte_quota(
    small_ws: tuple[Session, str],
) -> None:
    s, ws = small_ws
    code = (
        "import time\ni = 0\n"
        "while True:\n"
        "    with open(f'blob{i}', 'wb') as fh:\n        fh.write(b'x' * 2**20)\n"
        "    i += 1\n    time.sleep(0.005)"
    )
    r = await s.run(code, timeout=60)
    assert r.error is not None and r.error.type == "QuotaExceeded", r.to_text()
    assert not r.timed_out
    assert "16.0 MB" in r.error.message and "Delete files" in r.error.message
    assert _du(ws)[0] < 64 * MB  # stopped long before the timeout would have


async def test_a_burst_of_files_is_reported_over_the_file_quota(
    small_ws: tuple[Session, str],
) -> None:
    s, _ = small_ws
    r = await s.run("for i in range(3000):\n    open(f'f{i}', 'w').close()", timeout=60)
    assert r.error is not None and r.error.type == "QuotaExceeded", r.to_text()
    assert "500 files" in r.error.message


async def test_nested_directories_count_toward_the_file_quota(
    small_ws: tuple[Session, str],
) -> None:
    s, _ = small_ws
    r = await s.run("import os\nfor i in range(800):\n    os.makedirs(f'd{i}/e', exist_ok=True)")
    assert r.error is not None and r.error.type == "QuotaExceeded", r.to_text()


async def test_after_deleting_files_the_workspace_is_usable_again(
    small_ws: tuple[Session, str],
) -> None:
    s, _ = small_ws
    r = await s.run("for i in range(600):\n    open(f'f{i}', 'w').close()")
    assert r.error is not None and r.error.type == "QuotaExceeded"
    r = await s.run("import os\nfor n in os.listdir('.'):\n    os.unlink(n)\nlen(os.listdir('.'))")
    assert r.is_ok and r.value == 0, r.to_text()
    assert (await s.run("open('one', 'w').write('ok')")).is_ok


async def test_the_workspace_settings_set_the_sandboxs_quota(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text(json.dumps({"workspace_quota_files": 40}))
    ws = Workspace.open(base)
    ex = executor_by_name("sandbox", workspace=ws, pool_size=0)
    assert isinstance(ex, SandboxExecutor)
    assert ex.limits.workspace_files == 40 and ex.limits.workspace_mb == 1024
    async with Session(ex) as s:
        r = await s.run("for i in range(100):\n    open(f'f{i}', 'w').close()")
    assert r.error is not None and r.error.type == "QuotaExceeded", r.to_text()


# -- the memory, on the host -------------------------------------------------------------


def _quota_memory(path: Path, mb: int, records: int) -> Memory:
    path.mkdir(exist_ok=True)
    (path / "config.json").write_text(
        json.dumps({"memory_quota_mb": mb, "memory_quota_records": records})
    )
    return Memory.from_workspace(path)


async def test_an_artifact_over_the_memory_quota_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    mem = _quota_memory(tmp_path / "m", mb=2, records=100)
    await mem.artifacts.save("small", b"x" * MB)
    with pytest.raises(QuotaExceeded, match=r"limit 2\.0 MB"):
        await mem.artifacts.save("big", b"y" * (2 * MB))
    assert not await mem.artifacts.exists("big")
    # replacing a record only counts the difference
    await mem.artifacts.save("small", b"z" * (MB + MB // 2))
    assert await mem.artifacts.load("small") == b"z" * (MB + MB // 2)


async def test_a_streamed_value_is_cut_at_the_quota_and_leaves_no_file(tmp_path: Path) -> None:
    storage = QuotaStorage(FileStorage(tmp_path), max_bytes=3 * MB, max_records=None)

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"s" * MB

    with pytest.raises(QuotaExceeded):
        await storage.put("artifacts", "streamed", chunks(), {"type": "bytes"})
    assert not await storage.exists("artifacts", "streamed")
    assert [p.name for p in (tmp_path / "artifacts").iterdir() if p.name.startswith(".tmp")] == []


async def test_the_record_quota_counts_artifacts_skills_and_state_together(
    tmp_path: Path,
) -> None:
    mem = _quota_memory(tmp_path / "m", mb=100, records=3)
    await mem.artifacts.save("a1", "one")
    await mem.state.set("k", 1)
    await mem.skills.create("s1", "def run():\n    return 1\n", "returns one")
    with pytest.raises(QuotaExceeded, match="3 records"):
        await mem.artifacts.save("a2", "two")
    with pytest.raises(QuotaExceeded):
        await mem.skills.create("s2", "def run():\n    return 2\n", "returns two")
    await mem.state.set("k", 2)  # the state record exists: rewriting it is fine
    assert await mem.state.get("k") == 2


async def test_sandboxed_code_sees_a_clear_quota_error(tmp_path: Path) -> None:
    mem = _quota_memory(tmp_path / "m", mb=1, records=100)
    ex = SandboxExecutor(limits=SUITE_LIMITS, pool_size=0)
    async with Session(ex, memory=mem) as s:
        code = (
            "try:\n    artifacts.save('huge', b'q' * (2 * 2**20))\n"
            "except QuotaExceeded as e:\n    out = str(e)\nout"
        )
        r = await s.run("from codemode_worker.errors import QuotaExceeded\n" + code)
        assert r.is_ok, r.to_text()
        assert "Nothing was written" in r.value and "limit 1.0 MB" in r.value
        assert (await s.run("artifacts.exists('huge')")).value is False


# -- a full disk ---------------------------------------------------------------------------


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 512 KB tmpfs: writes past it fail with ENOSPC."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)])
    if r.returncode != 0:
        pytest.fail("mounting a tmpfs needs root (CI runs as root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


async def test_a_full_disk_during_an_artifact_write_loses_nothing(full_disk: Path) -> None:
    arts = Artifacts(FileStorage(full_disk))
    await arts.save("keep", b"old value")
    with pytest.raises(StorageUnavailable, match="is full") as err:
        await arts.save("keep", b"n" * MB)
    assert "was not saved" in str(err.value)
    assert await arts.load("keep") == b"old value"
    leftovers = [p.name for p in (full_disk / "artifacts").iterdir() if p.name.startswith(".tmp")]
    assert leftovers == []


async def test_a_full_disk_during_a_state_write_keeps_the_old_document(full_disk: Path) -> None:
    storage = FileStorage(full_disk)
    state = State(storage)
    await state.set("a", 1)
    filler = full_disk / "filler"
    with open(filler, "wb", buffering=0) as fh, pytest.raises(OSError):
        while True:
            fh.write(b"f" * 4096)
    with pytest.raises(StorageUnavailable, match="is full"):
        await state.set("b", "x" * 200_000)
    assert await state.get() == {"a": 1}


async def test_a_new_workers_first_sweep_runs_inline_once_its_workspace_is_known_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's first run waits for no thread hop when another worker of the same
    executor found the shared workspace small; the first one ever cannot know."""
    import threading

    from codemode.execution import guard

    ws = str(tmp_path / "ws")
    os.mkdir(ws)
    where: list[bool] = []  # each sweep: did it run on the event loop's thread?

    from codemode.isolation.sweep import Usage, sweep

    def spy(root: str, **kwargs: int) -> Usage:
        where.append(threading.current_thread() is threading.main_thread())
        return sweep(root, **kwargs)

    monkeypatch.setattr(guard, "sweep", spy)
    limits = Limits(**{**SUITE_LIMITS.__dict__, "workspace_mb": 16, "workspace_files": 500})
    executor = SandboxExecutor(workspace=ws, limits=limits, pool_size=0)
    async with Session(executor) as first:
        assert (await first.run("open('a.txt', 'w').write('x')")).error is None
    assert where[0] is False  # unknown size: on a thread
    where.clear()
    async with Session(executor) as second:
        result = await second.run("open('a.txt').read()")
    assert result.value == "x"
    assert where[0] is True


async def test_metadata_counts_toward_the_memory_quota(tmp_path: Path) -> None:
    """Skills with a tiny body and 60 KB of tags each: metadata is stored too, so it is
    counted; it used to fill the disk far past the quota (64 KB a record, 20,000 records)."""
    mem = _quota_memory(tmp_path / "m", mb=1, records=1000)
    code = "def run():\n    return 1\n"
    made = 0
    with pytest.raises(QuotaExceeded, match=r"limit 1\.0 MB"):
        for i in range(100):
            tags = [f"{i}-{t}-" + "t" * 1900 for t in range(32)]
            await mem.skills.create(f"s{i}", code, "one", tags=tags)
            made += 1
    assert 10 <= made < 20
    on_disk = sum(p.stat().st_size for p in (tmp_path / "m" / "skills").glob("*.rec"))
    assert on_disk <= MB + 70_000


async def test_bytes_in_files_deleted_but_held_open_count_toward_the_quota(
    small_ws: tuple[Session, str],
) -> None:
    # unlinked files no walk of /workspace can see still take the host's disk for as long
    # as a process of the sandbox holds them open (or mapped): 32 MB past a 16 MB quota
    s, _ = small_ws
    code = (
        "import mmap, os, time\nkeep = []\n"
        "for i in range(32):\n"
        "    fh = open(f'h{i}', 'wb+')\n    os.unlink(f'h{i}')\n"
        "    fh.write(os.urandom(2**20))\n    fh.flush()\n"
        "    if i % 2:\n        keep.append(mmap.mmap(fh.fileno(), 0))\n        fh.close()\n"
        "    keep.append(fh)\n"
        "time.sleep(3)"
    )
    r = await s.run(code, timeout=30)
    assert r.error is not None and r.error.type == "QuotaExceeded", r.to_text()
    assert not r.timed_out


WRITES_64_MB = (
    "    for i in range(64):\n"
    "        with open(f'bg{i}', 'wb') as fh:\n            fh.write(b'x' * 2**20)\n"
    "        time.sleep(0.03)\n"
)


def left_running(body: str) -> str:
    """Code that leaves a thread running ``fill`` (whose body is ``body``) after its run."""
    return (
        "import os, threading, time\ndef fill():\n"
        + body
        + "threading.Thread(target=fill, daemon=True).start()"
    )


async def test_code_left_writing_after_its_run_is_stopped_at_the_quota(
    small_ws: tuple[Session, str],
) -> None:
    # a thread (or a forked child) the run leaves behind writes while no run is active:
    # the quota holds between runs too, not only until the next run begins
    s, ws = small_ws
    code = left_running(WRITES_64_MB)
    assert (await s.run(code, timeout=30)).error is None
    await asyncio.sleep(4)
    assert _du(ws)[0] < 40 * MB  # 64 MB if nothing watched
    r = await s.run("1", timeout=30)
    assert any("stopped between runs" in w and "quota" in w for w in r.warnings), r.to_text()


async def test_code_left_to_write_one_burst_right_after_its_run_is_stopped_between_runs(
    small_ws: tuple[Session, str],
) -> None:
    """A thread that writes past the quota within the interval before the idle watch's
    first look, then stops, is the worker's own writing (its count moved since the run's
    end): the worker is stopped then, not left holding the workspace over its quota."""
    s, _ = small_ws
    code = left_running(
        "    time.sleep(0.05)\n"
        "    with open('burst', 'wb') as fh:\n"
        "        for i in range(24):\n            fh.write(b'x' * 2**20)\n"
    )
    assert (await s.run(code, timeout=30)).error is None
    await asyncio.sleep(3)
    r = await s.run("1", timeout=30)
    assert any("stopped between runs" in w and "quota" in w for w in r.warnings), r.to_text()


async def test_code_left_creating_empty_files_after_its_run_is_stopped_at_the_file_quota(
    small_ws: tuple[Session, str],
) -> None:
    # creating a file (or a directory) writes nothing a write count sees: past the file
    # quota, the worker whose code kept running is still the one stopped
    s, ws = small_ws
    code = left_running(
        "    for i in range(3000):\n"
        "        os.mkdir(f'd{i}')\n"
        "        if i % 50 == 0:\n            time.sleep(0.02)\n"
    )
    assert (await s.run(code, timeout=30)).error is None
    await asyncio.sleep(4)
    assert len(os.listdir(ws)) < 3000
    r = await s.run("1", timeout=30)
    assert any("stopped between runs" in w and "quota" in w for w in r.warnings), r.to_text()


BUSY_NOT_WRITING = (
    "import threading\n"
    "def spin():\n"
    "    while True:\n        sum(range(200000)); time.sleep(0.05)\n"
    "threading.Thread(target=spin, daemon=True).start()\n"
)


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "computing"])
async def test_an_idle_session_sharing_the_workspace_keeps_its_worker(
    tmp_path: Path, busy: bool
) -> None:
    # the writer is the session whose code was left running, not every session that
    # happens to share the workspace, even one that keeps computing (using CPU) meanwhile
    ws = str(tmp_path / "ws")
    os.mkdir(ws)
    limits = Limits(**{**SUITE_LIMITS.__dict__, "workspace_mb": 16, "workspace_files": 500})
    executor = SandboxExecutor(workspace=ws, limits=limits, pool_size=0)
    async with Session(executor) as writer, Session(executor) as bystander:
        first = "import time\nkept = 42\n" + (BUSY_NOT_WRITING if busy else "")
        assert (await bystander.run(first, timeout=30)).error is None
        code = left_running(WRITES_64_MB)
        assert (await writer.run(code, timeout=30)).error is None
        await asyncio.sleep(4)
        assert _du(ws)[0] < 40 * MB
        r = await writer.run("1", timeout=30)
        assert any("stopped between runs" in w for w in r.warnings), r.to_text()
        r = await bystander.run("kept", timeout=30)
        assert r.value == 42, r.to_text()
        assert not any("stopped between runs" in w for w in r.warnings), r.to_text()


async def test_a_deleted_file_put_in_flight_over_a_unix_socket_cannot_hide_from_the_quota(
    small_ws: tuple[Session, str],
) -> None:
    """A descriptor sent over a unix socket (SCM_RIGHTS) and closed belongs to no process:
    the quota's /proc count of open deleted files never saw its blocks (32 MB past a 16
    MB quota). Sending descriptors is refused in the sandbox, so the code keeps them open,
    where they count."""
    s, _ = small_ws
    code = (
        "import os, socket, time\na, b = socket.socketpair()\nkeep, sent, refused = [a, b], 0, 0\n"
        "for i in range(32):\n"
        "    fh = open(f'h{i}', 'wb+')\n    os.unlink(f'h{i}')\n"
        "    fh.write(os.urandom(2**20))\n    fh.flush()\n"
        "    try:\n        socket.send_fds(a, [b'x'], [fh.fileno()])\n"
        "    except PermissionError:\n        refused += 1\n        keep.append(fh)\n"
        "    else:\n        sent += 1\n        fh.close()\n"
        "time.sleep(3)\n(sent, refused)"
    )
    r = await s.run(code, timeout=30)
    assert r.error is not None and r.error.type == "QuotaExceeded", r.to_text()


async def test_unix_sockets_still_carry_data_without_descriptors(
    small_ws: tuple[Session, str],
) -> None:
    s, _ = small_ws
    code = (
        "import asyncio, socket\na, b = socket.socketpair()\na.sendall(b'ping')\n"
        "got = b.recv(4)\nawait asyncio.sleep(0)\n"
        "import multiprocessing as mp\nwith mp.get_context('fork').Pool(2) as pool:\n"
        "    squares = pool.map(abs, [-1, -2])\n[got.decode(), squares]"
    )
    r = await s.run(code, timeout=30)
    assert r.is_ok and r.value == ["ping", [1, 2]], r.to_text()
