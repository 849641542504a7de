"""The discovery benchmark scores codemode's real search over real servers' tools."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from codemode.bench.cli import bench
from codemode.bench.discovery import (
    Query,
    Scores,
    SnapshotSource,
    bm25_ranker,
    check_labels,
    evaluate,
    load_queries,
    load_snapshots,
)
from codemode.bench.tokens import BenchError
from codemode.errors import ToolError

REPO = Path(__file__).resolve().parents[2]

SNAP = {
    "name": "notes",
    "registry": "npm",
    "package": "notes-mcp",
    "version": "1.0.0",
    "tools": [
        {"name": "create-note", "description": "Write a new note.", "inputSchema": {}},
        {"name": "delete_note", "description": "Remove a note for good.", "inputSchema": {}},
        {"name": "get_weather", "description": "Forecast for a city.", "inputSchema": {}},
    ],
}


def test_committed_queries_label_only_catalog_tools_and_fill_both_splits() -> None:
    snapshots, queries = load_snapshots(), load_queries()
    check_labels(snapshots, queries)
    assert len(queries) >= 200
    assert sum(len(s["tools"]) for s in snapshots) >= 1000
    assert {q.split for q in queries} == {"dev", "heldout"}
    assert all(s["package"] and s["version"] for s in snapshots)


def test_a_label_naming_a_tool_the_catalog_lacks_is_refused() -> None:
    with pytest.raises(BenchError, match=r"notes\.nope"):
        check_labels([SNAP], [Query("q1", "x", ("notes.nope",), "dev")])


def test_bm25_ranker_answers_in_original_names_through_the_registry() -> None:
    rank = bm25_ranker([SNAP])
    assert anyio.run(rank, "write a note", 2)[0] == "notes.create-note"


def test_scores_count_recall_at_1_and_5_and_the_reciprocal_rank() -> None:
    queries = [
        Query("a", "first", ("s.t1",), "dev"),
        Query("b", "third", ("s.t3",), "dev"),
        Query("c", "never", ("s.zz",), "heldout"),
    ]

    async def rank(query: str, limit: int) -> list[str]:
        return ["s.t1", "s.t2", "s.t3", "s.t4", "s.t5", "s.t6"][:limit]

    scores = anyio.run(evaluate, rank, queries)
    assert scores["dev"].row() == {"queries": 2, "recall@1": 0.5, "recall@5": 1.0, "mrr": 0.6667}
    assert scores["heldout"].row()["mrr"] == 0.0
    assert [m[0] for m in scores["all"].misses] == ["c"]
    assert isinstance(scores["all"], Scores)


def test_a_snapshot_source_lists_its_tools_and_refuses_calls() -> None:
    source = SnapshotSource(SNAP)
    specs = anyio.run(source.list_tools)
    assert [s.name for s in specs] == ["create-note", "delete_note", "get_weather"]
    with pytest.raises(ToolError, match="no backend"):
        anyio.run(lambda: source.call_tool("create-note", {}))


def test_cli_prints_recall_and_mrr_per_split() -> None:
    result = CliRunner().invoke(bench, ["discovery"])
    assert result.exit_code == 0, result.output
    assert "recall@5" in result.output
    assert "p50 ms" in result.output
    for split in ("dev", "heldout", "all"):
        assert f"bm25        {split}" in result.output
    assert "target recall@5 >= 0.95 (all queries), bm25: " in result.output


def test_the_latency_benchmark_quick_mode_prints_build_and_search_times() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_discovery.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "discovery over 1,000 tool specs, 100 queries" in proc.stdout
    for row in ("index build (first search)", "registry.search detail=name", "baseline"):
        assert row in proc.stdout
    assert "target p50 <= 2 ms (detail=name): " in proc.stdout


def test_a_tool_is_embedded_whole_by_its_opening_paragraph_and_by_its_name() -> None:
    from codemode.bench.embeddings import VIEW_WEIGHTS, tool_views

    tool = {"name": "list_files", "description": "List a folder.\n\nGuardrails: never on /."}
    views = tool_views("local_fs", tool)
    assert set(views) == set(VIEW_WEIGHTS)
    assert views["full"] == "local_fs: list files. List a folder.\n\nGuardrails: never on /."
    assert views["first"] == "local fs: list files. List a folder."
    assert views["name"] == "local fs list files"
    assert sum(VIEW_WEIGHTS.values()) == pytest.approx(1.0)
