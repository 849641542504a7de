"""Tool-call lines of a run go out in batches: several processes writing batches still
extend one verifiable chain, pending lines are written at exit, when the run ends or after
``batch_seconds``, and a crash loses only the pending ones (what was written verifies)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from codemode.audit.keys import Keys
from codemode.audit.log import AuditLog
from codemode.audit.verify import verify
from codemode.errors import ConfigError

from .conftest import KEY

KEYS = Keys.derive(KEY.encode(), "test")

# argv: log, head, name, lines, how the process ends ("exit": normally, "crash": os._exit)
BATCH_WRITER = """
import os, sys
from pathlib import Path
from codemode.audit.keys import Keys
from codemode.audit.log import AuditLog
log = AuditLog(Path(sys.argv[1]), Keys.derive(sys.argv[3].encode(), "test"),
               head=Path(sys.argv[2]), max_bytes=6000, batch_lines=16, batch_seconds=60)
for i in range(int(sys.argv[5])):
    log.append({"kind": "tool", "server": "s", "tool": sys.argv[4] + str(i)}, defer=True)
if sys.argv[6] == "crash":
    os._exit(0)
"""


def writer(tmp: Path, name: str, lines: int, end: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-c", BATCH_WRITER, str(tmp / "audit.jsonl"), str(tmp / "head")]
    return subprocess.Popen([*argv, KEY, name, str(lines), end])


def count(path: Path) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in path.parent.glob("audit*.jsonl"))


def test_processes_writing_batches_at_once_extend_one_chain(tmp_path: Path) -> None:
    procs = [writer(tmp_path, name, 150, "exit") for name in ("a", "b", "c")]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0]
    report = verify(tmp_path / "audit.jsonl", tmp_path / "head", KEYS)
    assert report.ok, report.problems
    assert report.records == 450  # 150 = 9 batches of 16 + 6 pending, written at exit
    assert len(list(tmp_path.glob("audit.*.jsonl"))) > 1  # rotated in between


def test_a_crash_loses_only_the_pending_batch_and_the_rest_verifies(tmp_path: Path) -> None:
    assert writer(tmp_path, "a", 40, "crash").wait(timeout=120) == 0
    report = verify(tmp_path / "audit.jsonl", tmp_path / "head", KEYS)
    assert report.ok, report.problems
    assert report.records == 32  # two whole batches; the 8 pending lines died with it


def test_an_undeferred_line_writes_the_pending_ones_first_in_order(tmp_path: Path) -> None:
    log = AuditLog(
        tmp_path / "audit.jsonl",
        KEYS,
        head=tmp_path / "head",
        max_bytes=10**6,
        batch_lines=64,
        batch_seconds=60,
    )
    for i in range(3):
        log.append({"kind": "tool", "tool": f"t{i}"}, defer=True)
    assert count(tmp_path / "audit.jsonl") == 0
    log.append({"kind": "run"})
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    assert [line.split('"kind":"')[1][:3] for line in lines] == ["too"] * 3 + ["run"]
    assert verify(tmp_path / "audit.jsonl", tmp_path / "head", KEYS).ok
    log.close()


@pytest.mark.anyio
async def test_a_pending_batch_is_written_after_batch_seconds_without_more_calls(
    tmp_path: Path,
) -> None:
    log = AuditLog(
        tmp_path / "audit.jsonl",
        KEYS,
        head=tmp_path / "head",
        max_bytes=10**6,
        batch_lines=64,
        batch_seconds=0.05,
    )
    log.append({"kind": "tool", "tool": "t"}, defer=True)
    assert count(tmp_path / "audit.jsonl") == 0
    deadline = time.monotonic() + 10
    while count(tmp_path / "audit.jsonl") == 0 and time.monotonic() < deadline:
        await anyio.sleep(0.01)
    assert count(tmp_path / "audit.jsonl") == 1
    log.close()


def test_appending_to_a_closed_log_says_so(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", KEYS, head=tmp_path / "head", max_bytes=10**6)
    log.close()
    with pytest.raises(OSError, match="is closed"):
        log.append({"kind": "run"})


def test_two_names_of_one_workspace_share_one_log_so_a_run_writes_its_calls_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.audit.config import AuditConfig
    from codemode.audit.trail import Trail
    from codemode.context import CallContext

    monkeypatch.setenv("CODEMODE_AUDIT_KEY", KEY)
    ws = tmp_path / "ws"
    ws.mkdir()
    trail = Trail(AuditConfig(enabled=True, head_file=str(tmp_path / "head")))
    assert trail.log_for(str(ws)) is trail.log_for(str(ws / "." / ".." / "ws"))
    in_run = CallContext(session_id="s", run_id="r", workspace=str(ws))
    trail.write(in_run, {"kind": "tool", "tool": "t"})
    alias = CallContext(session_id="s", run_id="r", workspace=f"{ws}/.")
    trail.write(alias, {"kind": "run"})
    lines = (ws / "audit" / "audit.jsonl").read_text().splitlines()
    kinds = [line.split('"kind":"')[1][:3] for line in lines]
    assert kinds == ["too", "run"]
    trail.close()


def test_a_batch_left_by_a_closed_event_loop_is_written_by_the_next_loops_timer(
    tmp_path: Path,
) -> None:
    import asyncio

    path = tmp_path / "audit.jsonl"
    log = AuditLog(
        path, KEYS, head=tmp_path / "head", max_bytes=10**6, batch_lines=64, batch_seconds=0.05
    )

    async def defer_one() -> None:
        log.append({"kind": "tool", "tool": "t"}, defer=True)

    async def defer_one_and_wait() -> None:
        await defer_one()
        deadline = time.monotonic() + 10
        while count(path) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    asyncio.run(defer_one())  # the loop ends before its timer fires
    assert count(path) == 0
    log.flush()
    assert count(path) == 1
    asyncio.run(defer_one_and_wait())
    assert count(path) == 2
    log.close()


@pytest.mark.parametrize("planted", ["audit.jsonl", "audit.jsonl.lock", "head"])
def test_the_log_writes_through_no_link_planted_where_its_files_go(
    tmp_path: Path, planted: str
) -> None:
    """A link left where the log, its lock or its head go (by anything that could write
    in that folder once) must not make codemode, maybe root, write into its target."""
    target = tmp_path / "elsewhere"
    target.write_text("precious\n")
    (tmp_path / planted).symlink_to(target)
    with pytest.raises((ConfigError, OSError)) as err:
        log = AuditLog(tmp_path / "audit.jsonl", KEYS, head=tmp_path / "head", max_bytes=10**6)
        try:
            log.append({"kind": "run"})
        finally:
            log.close()
    assert "symbolic link" in str(err.value)
    assert target.read_text() == "precious\n"
