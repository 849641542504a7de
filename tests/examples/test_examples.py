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
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in PROVIDER_ENV and not k.startswith("CODEMODE_LLM_")
    }
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


def table_row(out: str, label: str) -> list[int]:
    """The numbers of the table row starting with ``label``."""
    found = re.search(rf"^ +{re.escape(label)} +([\d,]+) +([\d,]+)$", out, re.M)
    assert found, f"no row {label!r} in the output"
    return [int(n.replace(",", "")) for n in found.groups()]


def test_the_demo_tours_tool_calls_filtering_skills_and_guardrails(tmp_path: Path) -> None:
    needs(NPM / "server-filesystem", TIME_SERVER)
    out = run_example(tmp_path, "examples/demo.py")
    assert re.search(r"5000 rows read \([\d,]+ characters\), \d+ deals over 98,000", out)
    assert re.search(r"the model saw [\d,]+ characters instead of [\d,]+", out)
    assert re.search(r"Asia/Tokyo \d\d:\d\d", out)
    reused = out.split("== 5.")[1].split("== 6.")[0]
    assert "top_deals" in reused and "'regions': ['north'" in reused
    guardrails = out.split("== 6.")[1]
    assert "network blocked" in guardrails and "False False" in guardrails
    assert "stopped after its 1 s timeout" in guardrails and "still alive: 2" in guardrails


def test_a_multi_step_task_chains_three_servers_in_one_persistent_session(
    tmp_path: Path,
) -> None:
    needs(NPM / "server-filesystem", NPM / "server-memory", TIME_SERVER)
    out = run_example(tmp_path, "examples/multi_step_task.py")
    assert "3 meetings, 5 invitations" in out
    times = out.split("== 3.")[1].split("== 4.")[0]
    assert re.search(r"2026-11-23 09:30 Renewal.*\| Kenji Sato \d\d:30, Maria Lopez \d\d:30", times)
    assert "Tom Berg 11:00" in times and "Priya Nair" in times  # Oslo keeps Paris's time
    assert "7 entities, 5 relations in the graph" in out
    assert "Maria Lopez attends: ['Initech onboarding', 'Renewal of the Acme contract']" in out
    assert "wrote follow-ups.md with 5 tasks; cursor 2026-11-26" in out
    plan = out.split("the plan the agent wrote")[1]
    assert plan.index("Acme") < plan.index("Globex") < plan.index("Initech")
    assert plan.count("- [ ]") == 5


def test_progressive_disclosure_finds_a_tool_by_need_then_calls_it(tmp_path: Path) -> None:
    needs(NPM / "server-filesystem", NPM / "server-memory", TIME_SERVER)
    out = run_example(tmp_path, "examples/progressive_disclosure.py")
    assert "25 tools on files, memory, time" in out
    names_only = out.split("== 1.")[1].split("== 2.")[0]
    assert "time.get_current_time" in names_only and "Get current time" not in names_only
    assert "time.get_current_time - Get current time in a specific timezone" in out
    assert "tools.time.get_current_time(timezone: str) -> dict" in out
    assert re.search(r"Tokyo: \d{4}-\d\d-\d\dT\d\d:\d\d", out)
    # whichever of the server's reading tools ranks first (read_file is its older name)
    assert re.search(r"files\.read_(text_)?file \['path'", out), out
    assert "Flight to Tokyo on Friday" in out
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


def test_the_plugin_is_found_by_its_entry_point_and_keeps_a_ledger_of_tool_calls(
    tmp_path: Path,
) -> None:
    needs(NPM / "server-filesystem")
    out = run_example(tmp_path, "examples/plugin/ledger_demo.py")
    assert re.search(r"ledger +\[loaded\] +codemode_ledger:setup +\(codemode-ledger 0\.1\.0\)", out)
    assert "+ tool source ledger" in out and "+ step type ledger" in out
    workflow = out.split("`ledger` step type")[1].split("==")[0]
    assert "status=succeeded" in workflow
    assert re.search(r"files\.read_text_file +calls=2 failed=0", workflow)
    assert "caught ToolError" in out and "read ['a.txt', 'b.txt']" in out
    ledger = out.split("read the ledger")[1].split("==")[0]
    assert re.search(r"files\.read_text_file +calls=5 failed=1 bytes=\d{4}", ledger)
    assert re.search(r"files\.list_directory +calls=2 failed=0", ledger)
    assert not re.search(r"^ +ledger\.\w+ +calls=", ledger, re.M)  # reading it is not recorded
    assert "status=failed: audit: TooManyFailures: 1 tool calls failed; this step allows 0" in out


def test_side_by_side_counts_the_tokens_of_both_ways_for_the_same_answer(tmp_path: Path) -> None:
    needs(NPM / "server-filesystem", NPM / "server-memory")
    out = run_example(tmp_path, "examples/side_by_side.py")
    assert "Direct tool calls (23 tool definitions up front)" in out
    direct, code = table_row(out, "context at the end")
    assert direct > 20_000 and code < direct / 5
    billed_direct, billed_code = table_row(out, "input billed, all turns")
    assert billed_code < billed_direct
    answers = re.search(r"both answered: (Recorded: [^|]+) \| (Recorded: .+)", out)
    assert answers and answers[1].strip() == answers[2].strip()
    assert "run_code" in out.split("Code mode")[1] and "files__read_text_file" in out


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_llm_integration_runs_offline_against_the_fake_provider_by_default(
    tmp_path: Path, wire: str
) -> None:
    needs(NPM / "server-filesystem")
    out = run_example(tmp_path, "examples/llm_integration.py", "--wire", wire)
    assert "No model configured: a scripted model on http://127.0.0.1:" in out
    assert f"({wire} wire format)" in out
    assert "files.list_directory" in out.split("step 1")[1]
    assert "-> 2 of 3 notes: friday.txt, monday.txt" in out
    assert "2 of your 3 notes mention Paris (friday.txt, monday.txt)." in out
    assert "success=True stop_reason=answer steps=3 tool_calls=4" in out
    assert "served 3 requests; the first offered the tools ['run_code']" in out
