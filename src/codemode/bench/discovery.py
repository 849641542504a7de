"""Discovery quality: does ``search_tools`` find the tool a user's need calls for?

The catalog is ``benchmarks/discovery/catalog``: ``tools/list`` snapshots of real MCP
servers from npm and PyPI (see ``snapshot.py`` there). The queries are
``benchmarks/discovery/queries.jsonl``: needs written as users phrase them, each labelled
with every tool of the catalog that serves it, and a fixed ``dev``/``heldout`` split
(ranker changes may be looked at against ``dev`` only; ``heldout`` says whether they
generalise).

Rankers:

- ``bm25``: codemode's own ``ToolRegistry.search`` over the catalog, exactly what
  ``search_tools`` and ``tools.search`` run (the snapshots are served by
  :class:`SnapshotSource`, so no process is started);
- ``embeddings`` and ``hybrid`` (optional extra ``codemode[embeddings]``): all-MiniLM-L6-v2
  cosine similarity over each tool's name and description, alone or with BM25's score
  (see ``codemode.bench.embeddings``).

Metrics per split: recall@1 and recall@5 (a relevant tool among the first k results) and
MRR (reciprocal rank of the first relevant tool within the first 10, else 0).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codemode.bench.tokens import REPO_ROOT, BenchError
from codemode.errors import ToolError
from codemode.tools.registry import ToolRegistry
from codemode.tools.spec import ToolCallResult, ToolSpec

DATA = REPO_ROOT / "benchmarks" / "discovery"
DEPTH = 10
"""How many results each query asks for (MRR counts a hit up to this rank)."""
TARGET_RECALL5 = 0.95
"""The goal (issue: discovery quality): a relevant tool among the first 5 for 95% of needs."""

Ranker = Callable[[str, int], Awaitable[list[str]]]
"""``(query, limit) -> ["server.tool", ...]`` in original names, best first."""


class SnapshotSource:
    """A ``ToolSource`` serving a ``tools/list`` snapshot: it lists, it never calls."""

    def __init__(self, snapshot: dict[str, Any]) -> None:
        self._snapshot = snapshot

    @property
    def name(self) -> str:
        return str(self._snapshot["name"])

    async def list_tools(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                server=self.name,
                name=t["name"],
                description=t.get("description") or "",
                input_schema=t.get("inputSchema") or {"type": "object", "properties": {}},
                output_schema=t.get("outputSchema"),
                annotations=t.get("annotations") or {},
                title=t.get("title"),
            )
            for t in self._snapshot["tools"]
        ]

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> ToolCallResult:
        raise ToolError("a snapshot has no backend", server=self.name, tool=tool)

    async def aclose(self) -> None:
        return None


def load_snapshots(folder: Path | None = None) -> list[dict[str, Any]]:
    folder = folder or DATA / "catalog"
    snaps = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    if not snaps:
        raise BenchError(f"no tools/list snapshots in {folder}")
    return snaps


@dataclass(frozen=True)
class Query:
    id: str
    query: str
    relevant: tuple[str, ...]
    split: str


def load_queries(path: Path | None = None) -> list[Query]:
    path = path or DATA / "queries.jsonl"
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            out.append(Query(row["id"], row["query"], tuple(row["relevant"]), row["split"]))
    return out


def bm25_ranker(snapshots: Sequence[dict[str, Any]]) -> Ranker:
    """codemode's ``search_tools`` ranking over the snapshots."""
    registry = ToolRegistry([SnapshotSource(s) for s in snapshots])

    async def rank(query: str, limit: int) -> list[str]:
        rows = await registry.search(query, "name", limit)
        return [str(r.get("original") or r["name"]) for r in rows]

    return rank


@dataclass
class Scores:
    n: int = 0
    hits1: int = 0
    hits5: int = 0
    rr: float = 0.0
    misses: list[tuple[str, str, list[str]]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def add(self, q: Query, ranked: list[str], seconds: float = 0.0) -> None:
        self.n += 1
        self.seconds.append(seconds)
        rank = next((i for i, name in enumerate(ranked[:DEPTH], 1) if name in q.relevant), None)
        if rank == 1:
            self.hits1 += 1
        if rank is not None and rank <= 5:
            self.hits5 += 1
        self.rr += 1 / rank if rank else 0.0
        if rank is None or rank > 5:
            self.misses.append((q.id, q.query, ranked[:5]))

    def row(self) -> dict[str, Any]:
        n = max(self.n, 1)
        return {
            "queries": self.n,
            "recall@1": round(self.hits1 / n, 4),
            "recall@5": round(self.hits5 / n, 4),
            "mrr": round(self.rr / n, 4),
        }

    def p50_ms(self) -> float:
        """Median time one query took to rank, in milliseconds."""
        return statistics.median(self.seconds) * 1e3 if self.seconds else 0.0


async def evaluate(rank: Ranker, queries: Sequence[Query]) -> dict[str, Scores]:
    """Scores per split, plus ``all``."""
    out: dict[str, Scores] = {}
    await rank("warm up", DEPTH)  # index builds and model loads are not per-query costs
    for q in queries:
        start = time.perf_counter()
        ranked = await rank(q.query, DEPTH)
        took = time.perf_counter() - start
        for split in (q.split, "all"):
            out.setdefault(split, Scores()).add(q, ranked, took)
    return out


def check_labels(snapshots: Sequence[dict[str, Any]], queries: Sequence[Query]) -> None:
    """Every label names a tool of the catalog; else the benchmark refuses to run."""
    names = {f"{s['name']}.{t['name']}" for s in snapshots for t in s["tools"]}
    bad = sorted({r for q in queries for r in q.relevant} - names)
    if bad:
        raise BenchError(f"queries label tools the catalog lacks: {', '.join(bad[:10])}")


def ranker_by_name(
    name: str, snapshots: Sequence[dict[str, Any]], built: dict[str, Any] | None = None
) -> Ranker:
    """The ranker called ``name``; ``built`` caches what rankers share (the hybrid reuses
    the embeddings, which take a while to compute on a CPU)."""
    built = built if built is not None else {}
    if name not in built:
        if name == "bm25":
            built[name] = bm25_ranker(snapshots)
        elif name in ("embeddings", "hybrid"):
            from codemode.bench import embeddings

            if "dense" not in built:
                built["dense"] = embeddings.DenseScores(snapshots)
            if name == "embeddings":
                built[name] = embeddings.embedding_ranker(built["dense"])
            else:
                built[name] = embeddings.hybrid_ranker(built["dense"], snapshots)
        else:
            raise BenchError(f"unknown ranker {name!r}; choose bm25, embeddings or hybrid")
    ranker: Ranker = built[name]
    return ranker


async def run(rankers: Sequence[str]) -> dict[str, dict[str, Scores]]:
    snapshots = load_snapshots()
    queries = load_queries()
    check_labels(snapshots, queries)
    built: dict[str, Any] = {}
    return {
        name: await evaluate(ranker_by_name(name, snapshots, built), queries) for name in rankers
    }


def catalog_summary(snapshots: Sequence[dict[str, Any]] | None = None) -> str:
    snapshots = snapshots if snapshots is not None else load_snapshots()
    npm = sum(1 for s in snapshots if s["registry"] == "npm")
    tools = sum(len(s["tools"]) for s in snapshots)
    return (
        f"catalog: {tools:,} tools on {len(snapshots)} real MCP servers "
        f"({npm} from npm, {len(snapshots) - npm} from PyPI)"
    )
