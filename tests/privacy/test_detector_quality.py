"""Detector quality on the frozen, labelled corpus (tests/privacy/corpus, see its README).

Goals from the issue, for the structured types: recall >= 99% and false positives <= 1%.
`benchmarks/bench_privacy.py --only quality` prints the full table.
"""

from __future__ import annotations

from pathlib import Path

from codemode.privacy.config import PrivacyConfig
from codemode.privacy.detectors import BUILTIN_ENTITIES
from codemode.privacy.engine import build_scanner
from codemode.privacy.quality import load_corpus, score

CORPUS = Path(__file__).parent / "corpus" / "corpus.jsonl"


def test_recall_and_precision_per_type_meet_the_goals_on_the_frozen_corpus() -> None:
    result = score(build_scanner(PrivacyConfig(enabled=True)), load_corpus(CORPUS))
    table = result.table()
    for entity in BUILTIN_ENTITIES:
        assert result.recall(entity) >= 0.99, table
        assert result.precision(entity) >= 0.99, table
    assert result.fp_rate() <= 0.01, table


def test_the_corpus_is_the_frozen_one() -> None:
    rows = list(load_corpus(CORPUS))
    assert len(rows) == 7134
    labelled = sum(len(r["entities"]) for r in rows)
    assert labelled == 5 * 630 + 420
