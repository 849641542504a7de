"""CI may never skip the hostile-code suite silently: without a sandbox it fails, saying why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _pytest(*extra_env: tuple[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CODEMODE_BWRAP": "/nonexistent/bwrap", **dict(extra_env)}
    env.pop("CODEMODE_SECURITY_STRICT", None)
    env.update(dict(extra_env))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/security/test_kernel.py"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_without_a_sandbox_ci_fails_and_names_the_reason() -> None:
    p = _pytest(("CODEMODE_SECURITY_STRICT", "1"))
    assert p.returncode != 0
    assert "forbids skipping" in p.stdout + p.stderr
    assert "bubblewrap" in p.stdout + p.stderr


def test_outside_ci_a_machine_without_a_sandbox_skips_with_the_reason() -> None:
    p = _pytest()
    assert p.returncode in (0, 5), p.stdout + p.stderr
    assert "skipped" in p.stdout


def test_ci_runs_the_suite_in_strict_mode() -> None:
    text = (REPO / ".ci" / "run").read_text()
    assert "export CODEMODE_SECURITY_STRICT=1" in text
