"""The runnable examples of ``examples/``: each runs as a newcomer runs it (a subprocess of
this interpreter, against the real MCP servers CI installs) and prints what it promises."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
NPM = REPO / ".ci" / "node" / "node_modules" / "@modelcontextprotocol"
TIME_SERVER = REPO / ".ci" / "venvs" / "mcp-server-time" / "bin" / "python"
PROVIDER_ENV = ("LLM_PROVIDER", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY")


def needs(*paths: Path) -> None:
    for path in paths:
        if not path.exists():
            pytest.skip(f"{path} is missing: run .ci/install-test-servers.sh")


def run_example(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in PROVIDER_ENV}
    clean |= {"XDG_CONFIG_HOME": str(tmp_path / "config"), **(env or {})}
    done = subprocess.run(
        [sys.executable, *args], cwd=REPO, env=clean, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def figure(out: str, label: str) -> int:
    """The number printed after ``label:`` (commas allowed)."""
    found = re.search(rf"{label}: +([\d,]+)", out)
    assert found, f"no {label!r} in the output"
    return int(found[1].replace(",", ""))


def test_progressive_disclosure_finds_a_tool_by_need_then_calls_it(tmp_path: Path) -> None:
    needs(NPM / "server-filesystem", NPM / "server-memory", TIME_SERVER)
    out = run_example(tmp_path, "examples/progressive_disclosure.py")
    assert "25 tools on files, memory, time" in out
    names_only = out.split("== 1.")[1].split("== 2.")[0]
    assert "time.get_current_time" in names_only and "Get current time" not in names_only
    assert "time.get_current_time - Get current time in a specific timezone" in out
    assert "tools.time.get_current_time(timezone: str) -> dict" in out
    assert re.search(r"Tokyo: \d{4}-\d\d-\d\dT\d\d:\d\d", out)
    assert "files.read_text_file ['path'" in out and "Flight to Tokyo on Friday" in out
    assert 0 < figure(out, "discovery output") < figure(out, "full catalog") / 10


def test_privacy_shows_tokens_to_the_model_and_real_values_to_the_sink(tmp_path: Path) -> None:
    out = run_example(tmp_path, "examples/privacy.py")
    model_view, host_view = out.split("== 5.")
    for real in ("alice.martin@example.com", "4111 1111 1111 1111", "+1 415-555-0132"):
        assert real not in model_view
        assert real in host_view or "555-0132" in real
    assert re.search(r"Alice Martin \[EMAIL_\w{10}\] \[PHONE_\w{10}\] \[CREDIT_CARD_\w{10}\]", out)
    assert "[US_SSN_" in model_view and "[IBAN_" in model_view
    assert "found customer 1003" in out and "sent 3 messages" in out
    assert "to=chloe.dubois@example.fr" in host_view
    assert "real e-mails and cards delivered: 6; model saw: 0" in out
