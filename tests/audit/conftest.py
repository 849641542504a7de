"""An audited notes workspace: the key in the environment, the head file outside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

KEY = "audit-test-key-0123456789abcdef"


class Audited:
    def __init__(self, ws: Any, root: Path) -> None:
        self.ws = ws
        self.head = root / "outside" / "audit.head"
        self.log = ws.base / "audit" / "audit.jsonl"

    def config(self, **audit: Any) -> dict[str, Any]:
        return {"enabled": True, "head_file": str(self.head), **audit}

    def records(self) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [json.loads(line) for line in lines]

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "CODEMODE_AUDIT_KEY": KEY}
        argv = [sys.executable, "-m", "codemode", "audit", *args, "--base", str(self.ws.base)]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def audited(notes_ws: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Audited:
    monkeypatch.setenv("CODEMODE_AUDIT_KEY", KEY)
    return Audited(notes_ws, tmp_path)
