"""The token benchmark runs end to end against real servers and reports honest shapes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from codemode.bench.cli import bench
from codemode.bench.report import iter_lines, write_plot
from codemode.bench.scenarios import run_benchmark
from codemode.bench.tokens import (
    BenchError,
    ScenarioResult,
    Sizes,
    Transcript,
    connect_all,
    count_tokens,
)

KEYS = {
    "name",
    "tokens_direct",
    "tokens_codemode",
    "reduction_pct",
    "round_trips_direct",
    "round_trips_codemode",
}


@pytest.mark.timeout(240)
def test_quick_meeting_scenario_writes_json_and_code_mode_uses_fewer_tokens(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    args = ["tokens", "--quick", "--scenario", "meeting-notes-to-crm", "--json", str(out)]
    result = CliRunner().invoke(bench, args)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert [d["name"] for d in data] == ["meeting-notes-to-crm"]
    assert data[0].keys() >= KEYS
    assert data[0]["tokens_codemode"] < data[0]["tokens_direct"]
    assert data[0]["round_trips_direct"] == 3
    assert "meeting-notes-to-crm" in result.output


@pytest.mark.timeout(240)
def test_privacy_counts_every_customer_pii_value_in_direct_context_and_none_in_code_mode() -> None:
    sizes = Sizes(customers=10, real_servers=False)
    (privacy,) = anyio.run(lambda: run_benchmark(["privacy"], sizes))
    assert privacy.extra["pii_values_total"] == 20
    assert privacy.extra["pii_direct"] == 20
    assert privacy.extra["pii_codemode"] == 0


def test_unknown_scenario_is_refused_before_anything_starts() -> None:
    result = CliRunner().invoke(bench, ["tokens", "--scenario", "nope"])
    assert result.exit_code == 2
    assert "meeting-notes-to-crm" in result.output


def test_transcript_counts_each_entry_and_bills_every_turn_for_what_came_before() -> None:
    t = Transcript("direct")
    t.add("task", "hello world")
    t.round_trips = 1
    t.add("call", "call one")
    t.round_trips = 2
    t.add("answer", "done")
    assert t.tokens == count_tokens("hello world") + count_tokens("call one") + count_tokens("done")
    # turn 1 reads the task; turn 2 reads the task and the call
    assert t.input_tokens_billed == 2 * count_tokens("hello world") + count_tokens("call one")


def test_plot_draws_the_results_table_as_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    direct, code = Transcript("direct"), Transcript("code mode")
    direct.add("result", "x " * 1000)
    code.add("result", "x")
    direct.round_trips = code.round_trips = 1
    results = [ScenarioResult.from_transcripts("demo", "a demo", direct, code)]
    write_plot(results, tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes().startswith(b"\x89PNG")
    assert any("demo" in line for line in iter_lines(results))


def test_a_server_that_dies_at_start_is_named_with_its_stderr(tmp_path: Path) -> None:
    crash = "import sys; print('boom: no config', file=sys.stderr); sys.exit(3)"
    catalog = {"broken": {"command": sys.executable, "args": ["-c", crash]}}

    async def connect() -> None:
        async with connect_all(catalog, tmp_path):
            pass

    with pytest.raises(BenchError, match=r"broken: .*boom: no config"):
        anyio.run(connect)


def test_bench_tokens_offline_says_in_one_line_how_to_fix_it(tmp_path: Path) -> None:
    empty = tmp_path / "tiktoken"
    empty.mkdir()
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(empty)}
    env["HTTPS_PROXY"] = env["https_proxy"] = "http://127.0.0.1:9"  # no download, anywhere
    done = subprocess.run(
        [sys.executable, "-m", "codemode", "bench", "tokens", "--quick"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"Error: the o200k_base tokenizer is not in {empty} and cannot be downloaded (no "
        "network?); set TIKTOKEN_CACHE_DIR to a folder holding "
        "fb374d419588a4632f3f557e76b4b70aebbca790 (tiktoken saves it there on one run with "
        "internet access)"
    ]
