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

from codemode.bench.catalogs import Sizes, article_catalog
from codemode.bench.cli import bench
from codemode.bench.grounding import Fact, code_facts, unseen
from codemode.bench.report import iter_lines, write_plot
from codemode.bench.runner import run_benchmark
from codemode.bench.tokens import (
    Agent,
    BenchError,
    ScenarioResult,
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


@pytest.mark.timeout(300)
def test_quick_meeting_scenario_reports_each_serve_profile_and_counts_instructions(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results.json"
    args = ["tokens", "--quick", "--scenario", "meeting-notes-to-crm", "--json", str(out)]
    args += ["--serve-tools", "core", "--serve-tools", "minimal"]
    result = CliRunner().invoke(bench, args)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert [(d["name"], d["serve_tools"]) for d in data] == [
        ("meeting-notes-to-crm", "core"),
        ("meeting-notes-to-crm", "minimal"),
    ]
    core, minimal = data
    assert core.keys() >= KEYS
    assert minimal["tokens_codemode"] < core["tokens_codemode"] < core["tokens_direct"]
    assert core["round_trips_direct"] == 3
    # Every server's instructions are in the context, on both sides.
    assert core["breakdown_direct"]["instructions"] > 0
    assert core["breakdown_codemode"]["instructions"] > 0
    # The minimal profile's fixed cost (instructions + definitions) stays under 1,000 tokens.
    assert minimal["extra"]["codemode_fixed_tokens"] <= 1000
    assert "code mode minimal" in result.output


@pytest.mark.timeout(600)
def test_with_privacy_on_no_pii_reaches_the_model_even_when_the_agent_prints_every_customer() -> (
    None
):
    sizes = Sizes(customers=10, real_servers=False)
    privacy, careless = anyio.run(
        lambda: run_benchmark(["privacy", "privacy-careless"], sizes, profiles=("minimal",))
    )
    for result in (privacy, careless):
        assert result.extra["pii_values_total"] == 20
        assert result.extra["pii_direct"] == 20
        assert result.extra["pii_codemode"] == 0
        assert result.extra["pii_in_crm"] == 20  # the CRM, a sink, got every real value
    # The careless agent printed the list: the model read 10 customers' tokens instead.
    assert careless.tokens_codemode > privacy.tokens_codemode


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
    results = [ScenarioResult.from_transcripts("demo", "a demo", direct, code, "all")]
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


def test_code_facts_are_the_tools_arguments_keys_and_compared_values_code_relies_on() -> None:
    code = (
        "res = tools.crm.attach_document(record_id=r, **{'name': n})\n"
        "if res['status'] != 'attached' and res.get('chars'):\n"
        "    print('done:', res)\n"
    )
    facts = code_facts(code)
    assert Fact("tool", "crm.attach_document") in facts
    assert {Fact("argument", "record_id"), Fact("argument", "name")} <= set(facts)
    assert {Fact("key", "status"), Fact("key", "chars"), Fact("value", "attached")} <= set(facts)
    assert Fact("value", "done:") not in facts  # words of a print are the agent's own
    assert unseen(facts, "crm.attach_document record_id name status chars attached") == []
    assert unseen([Fact("key", "chars")], "characters") == [Fact("key", "chars")]


def test_a_scripted_turn_that_uses_a_result_key_nothing_showed_is_refused() -> None:
    async def caller(name: str, args: dict[str, object]) -> object:
        raise AssertionError("a refused turn must not reach the server")

    run_code = {"name": "run_code", "description": "", "input_schema": {"code": {}}}
    agent = Agent("code mode", [run_code], "attach it", caller, code_tool="run_code")  # type: ignore[arg-type]
    code = "print(tools.crm.attach_document(content='x')['attachment_id'])"
    with pytest.raises(BenchError, match=r"hindsight: the code .*crm\.attach_document"):
        anyio.run(agent.turn, ("run_code", {"code": code}))
    assert agent.transcript.round_trips == 0


def test_the_article_catalog_takes_the_smallest_real_servers_until_it_has_enough_tools() -> None:
    catalog, n_tools = article_catalog(1000, 20)
    assert n_tools >= 1000 and len(catalog) >= 20
    assert all("replay_server.py" in spec["args"][0] for spec in catalog.values())
    with pytest.raises(BenchError, match="needs 100000"):
        article_catalog(100_000, 20)


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
