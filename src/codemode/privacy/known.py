"""Values the vault holds, found again where no detector would recognise them.

A detector finds a value in its context: a bare 10-digit number is a phone under
``"phone"`` and an order id elsewhere; a name is a ``PERSON`` only where a NER model
says so; a custom recognizer may need a context word. Once the vault has issued a token
for such a value, codemode knows it is personal data, and the same value returned by
another tool (as a plain field, or inside free text) must get the same token.

``KnownValues.find(texts)`` returns, per text, the spans of held values:

- a whole text equal to a held value of ``MIN_WHOLE``+ characters: one dict look-up per
  text (``map(dict.get, texts)``, in C);
- a held value of ``MIN_INSIDE``+ characters inside a longer text, standing alone
  (no letter or digit right before or after it). Texts holding no held value cost little:
  with a few held values, ``value in text`` each (a C search, cheap below ``FIND_MAX``
  values); with more, the texts' words (bytes, punctuation turned into spaces, split)
  are intersected with an index of each value's longest word, and only the values whose
  word is present are searched for. Nothing is O(held values x text) past ``FIND_MAX``.

Why the minimums: fields of 1-3 characters are codes (``"US"``, ``"CA"``, ``"yes"``,
``"N/A"``), and no built-in detector issues a value that short (an IPv4 address has 7+
characters, a phone 7+ digits); inside free text, 4-5 characters ("Anna", "Main") are too
often part of ordinary prose. A value that is one lower-case word ("active", "street":
a NER model's or a deny-list's mistake) is never searched for: it would turn every
occurrence of an ordinary word into a token. Matching is exact (case-sensitive).

The index follows the vault: one ``KnownValues`` per ``Privacy`` engine, so per
workspace and tenant (or per client session with ``vault.scope: session``); values of
another tenant's vault are never looked at. It is rebuilt lazily when the vault grew.
"""

from __future__ import annotations

import bisect
import string
import threading
from collections.abc import Mapping
from itertools import accumulate, compress, count
from operator import is_not

from .tokens import token_entity

__all__ = [
    "FIND_MAX",
    "MIN_INSIDE",
    "MIN_WHOLE",
    "KnownValues",
    "replace_spans",
    "searchable",
]

MIN_WHOLE = 4
"""Characters a held value needs to be found as a whole text (a JSON string value)."""
MIN_INSIDE = 6
"""Characters a held value needs to be found inside a longer text."""
FIND_MAX = 48
"""Held values searched one by one (``value in text``); past this, by word index."""

_SEP = "\x00"
_PUNCT = (string.punctuation + string.whitespace + "\x00").encode()
_TO_SPACE = bytes.maketrans(_PUNCT, b" " * len(_PUNCT))


def searchable(value: str) -> bool:
    """Whether a held value is looked for again at all (see the module doc)."""
    return (
        len(value) >= MIN_WHOLE and not (value.isalpha() and value.islower()) and _SEP not in value
    )


def _words(text: str) -> list[bytes]:
    return text.encode("utf-8", "surrogatepass").translate(_TO_SPACE).split()


class KnownValues:
    """Finds the values of one vault's ``held`` map (value -> token) in texts."""

    def __init__(self, held: Mapping[str, str]) -> None:
        self._held = held
        self._size = -1
        self._lock = threading.Lock()
        self._whole: dict[str, str] = {}
        self._inside: list[str] = []
        self._anchors: dict[bytes, list[str]] = {}

    def _index(self) -> None:
        """(Re)build the indexes when the vault holds more values than at the last build."""
        held = self._held
        if len(held) == self._size:
            return
        with self._lock:
            if len(held) == self._size:
                return
            values = [v for v in list(held) if searchable(v)]
            whole = {v: token_entity(held[v]) for v in values}
            inside = sorted((v for v in values if len(v) >= MIN_INSIDE), key=len, reverse=True)
            anchors: dict[bytes, list[str]] = {}
            for v in inside:
                words = _words(v)
                if words:
                    anchors.setdefault(max(words, key=len), []).append(v)
            self._whole, self._inside, self._anchors = whole, inside, anchors
            self._size = len(held)

    def find(self, texts: list[str]) -> dict[int, list[tuple[int, int, str]]]:
        """{text index: [(start, end, entity), ...] in order, not overlapping}."""
        if not self._held:
            return {}
        self._index()
        whole = self._whole
        if not whole:
            return {}
        out: dict[int, list[tuple[int, int, str]]] = {}
        hits = list(map(whole.get, texts))
        if any(hits):
            for i in compress(count(), map(is_not, hits, [None] * len(hits))):
                out[i] = [(0, len(texts[i]), hits[i])]  # type: ignore[list-item]
        if not self._inside:
            return out
        rest = [
            i for i in compress(count(), map(MIN_INSIDE.__lt__, map(len, texts))) if i not in out
        ]
        if not rest:
            return out
        # Distinct texts only: notes from a few templates are searched once.
        distinct = list(dict.fromkeys(map(texts.__getitem__, rest)))
        found = self._inside_texts(distinct)
        if found:
            for i in rest:
                spans = found.get(texts[i])
                if spans:
                    out[i] = spans
        return out

    def _inside_texts(self, texts: list[str]) -> dict[str, list[tuple[int, int, str]]]:
        """{text: spans} for the texts holding a held value inside them."""
        joined = _SEP.join(texts)
        if len(self._inside) <= FIND_MAX:
            candidates = [v for v in self._inside if v in joined]
        else:
            present = set(_words(joined))
            candidates = [v for w in present.intersection(self._anchors) for v in self._anchors[w]]
            candidates = [v for v in candidates if v in joined]
        if not candidates:
            return {}
        candidates.sort(key=len, reverse=True)  # the longest first where two overlap
        starts = list(accumulate((len(t) + 1 for t in texts), initial=0))
        per: dict[int, list[tuple[int, int, str]]] = {}
        taken: dict[int, list[tuple[int, int]]] = {}
        for v in candidates:
            entity = self._whole[v]
            n = len(v)
            pos = joined.find(v)
            while pos >= 0:
                end = pos + n
                if _alone(joined, pos, end):
                    k = bisect.bisect_right(starts, pos) - 1
                    a, b = pos - starts[k], end - starts[k]
                    spans = taken.setdefault(k, [])
                    if not any(a < e and s < b for s, e in spans):
                        spans.append((a, b))
                        per.setdefault(k, []).append((a, b, entity))
                pos = joined.find(v, end)
        return {texts[k]: sorted(spans) for k, spans in per.items()}


def _alone(text: str, start: int, end: int) -> bool:
    """No letter or digit right before ``start`` or right at ``end``: "Anna Lee" is not
    found in "Hanna Leeds", "5551234567" not in "15551234567"."""
    return (start == 0 or not text[start - 1].isalnum()) and (
        end == len(text) or not text[end].isalnum()
    )


def replace_spans(
    texts: list[str], found: Mapping[int, list[tuple[int, int, str]]], tokens: list[str]
) -> list[str]:
    """A copy of ``texts`` with the spans of ``found`` (in its order) replaced by
    ``tokens``, one per span."""
    out = list(texts)
    it = iter(tokens)
    for i, spans in found.items():
        text = texts[i]
        parts: list[str] = []
        pos = 0
        for a, b, _ in spans:
            parts.append(text[pos:a])
            parts.append(next(it))
            pos = b
        parts.append(text[pos:])
        out[i] = "".join(parts)
    return out
