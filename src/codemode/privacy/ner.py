"""Names and addresses: a spaCy model the user installed (optional: ``codemode[ner]``).

Structured values have checksums and numbering plans; names and addresses need a
language model. This detector loads one with ``spacy.load`` from an installed package
name (``en_core_web_sm``, after ``python -m spacy download en_core_web_sm``) or a model
directory, and maps its labels to entity types (``PERSON``, ``LOCATION``). It never
downloads anything: a missing model is a ``ConfigError`` that says how to install one.

spaCy directly rather than Presidio's ``AnalyzerEngine``: the engine downloads a missing
spaCy model at load time, and its NER is this same spaCy call underneath.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from codemode.errors import ConfigError

from .config import NERConfig

__all__ = ["NERDetector"]

MAX_NER_CHARS = 100_000
"""Longer texts are split at line breaks: spaCy's cost and memory grow with length."""


class NERDetector:
    def __init__(self, config: NERConfig, *, exclude: Iterable[str] = ()) -> None:
        try:
            import spacy
        except ImportError:
            raise ConfigError(
                "privacy.ner needs spaCy: pip install 'codemode[ner]', then install a "
                "model (e.g. python -m spacy download en_core_web_sm) and name it in "
                "privacy.ner.model"
            ) from None
        model = config.model
        if not Path(model).expanduser().is_dir() and not spacy.util.is_package(model):
            raise ConfigError(
                f"privacy.ner.model: no installed spaCy model {model!r}. Install one "
                f"(python -m spacy download {model}) or give a model directory; codemode "
                "never downloads models at run time."
            )
        try:
            self._nlp: Any = spacy.load(str(Path(model).expanduser()) if "/" in model else model)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"privacy.ner.model: cannot load {model!r}: {exc}") from None
        skip = set(exclude)
        self._labels = {k: v for k, v in config.labels.items() if v in config.entities}
        self._labels = {k: v for k, v in self._labels.items() if v not in skip}
        self.entities = tuple(dict.fromkeys(self._labels.values()))

    def find(self, text: str) -> Iterator[tuple[int, int, str]]:
        for offset, chunk in _chunks(text):
            # NUL separates strings of a JSON value: spaCy should see line breaks.
            doc = self._nlp(chunk.replace("\x00", "\n"))
            for ent in doc.ents:
                entity = self._labels.get(ent.label_)
                if entity is not None and ent.text.strip():
                    yield offset + ent.start_char, offset + ent.end_char, entity


def _chunks(text: str) -> Iterator[tuple[int, str]]:
    start = 0
    while start < len(text):
        end = min(len(text), start + MAX_NER_CHARS)
        if end < len(text):
            cut = max(text.rfind("\n", start, end), text.rfind("\x00", start, end))
            if cut > start:
                end = cut + 1
        yield start, text[start:end]
        start = end
