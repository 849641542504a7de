"""``codemode checkpoints list|delete`` on a workspace whose sessions left checkpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codemode import Session, SubprocessExecutor

pytestmark = pytest.mark.anyio


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codemode", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )


async def test_list_shows_what_sessions_left_and_delete_removes_it(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"checkpoint": {"auto": True}}))
    async with Session.from_base(tmp_path, executor=SubprocessExecutor()) as s:
        await s.run("import threading\nx = 1\nlock = threading.Lock()")
        assert s.checkpoints is not None
        name = s.checkpoints.name
    listed = cli("checkpoints", "list", "--base", str(tmp_path), "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert row["name"] == name and row["skipped"] == ["lock"] and row["names"] == 2
    text = cli("checkpoints", "list", "--base", str(tmp_path)).stdout
    assert name in text and "not saved: lock" in text
    assert cli("checkpoints", "delete", "--base", str(tmp_path), name).returncode == 0
    gone = cli("checkpoints", "delete", "--base", str(tmp_path), name)
    assert gone.returncode != 0 and "no checkpoint named" in gone.stderr
    assert "No checkpoints." in cli("checkpoints", "list", "--base", str(tmp_path)).stdout
