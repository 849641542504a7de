"""The scanner: every detector over a text, overlaps resolved, existing tokens left alone.

``Scanner.spans(text)`` is the one place detection happens; tokenizing, redacting, the
stream scanner and the quality benchmark all go through it. Overlaps are resolved by
priority (a secret beats everything; configured recognizers and deny-lists beat the
built-in types; checked numbers beat loose shapes; NER comes last), then by length.

What the detectors find in a large text is kept (``CACHE_MIN``, ``CACHE_CHARS``): the
same tool result fetched again (the same page of a table, a file read twice) is not
scanned again. Detectors are pure functions of the text; one whose results may change
(the credentials net, when a secret is remembered) says so with ``generation``, which
is part of the cache's check.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from itertools import islice
from operator import ge, gt, itemgetter
from time import perf_counter
from typing import NamedTuple, Protocol

from codemode.literals import one_pass

from .detectors import Detector
from .splice import SEP
from .tokens import TOKEN_RE


class SpanDecoder(Detector, Protocol):
    """The encoded spans' detector (``.encoded``; a protocol: that module builds its
    detector on a ``Scanner``, so the two do not import each other)."""

    def finish(self, text: str, start: int, end: int, kind: str) -> str | None: ...


POOL_MIN = 131_072
"""Texts this long are split with the scanner process (``.pool``); shorter ones are not
worth a round trip."""

__all__ = ["CACHE_CHARS", "CACHE_MIN", "PRIORITY", "Scanner", "Span"]

CACHE_MIN = 65_536
"""Texts this long have their detections kept (a smaller one costs little to scan)."""
CACHE_CHARS = 16_000_000
"""Characters of text kept at most, least recently used dropped first."""

PRIORITY = (
    "SECRET",
    "IBAN",
    "CREDIT_CARD",
    "US_SSN",
    "EMAIL",
    "IP_ADDRESS",
    "PHONE",
)
"""Built-in types, strongest first; custom types rank just after SECRET, NER types last."""


class Span(NamedTuple):
    start: int
    end: int
    entity: str


_start, _end = itemgetter(0), itemgetter(1)
_new_span = tuple.__new__  # Span(...) without the call of its Python-level __new__


class _Ranks(dict[str, int]):
    """``Scanner.rank`` of each entity type, computed on first use."""

    def __init__(self, rank: Callable[[str], int]) -> None:
        super().__init__()
        self._rank = rank

    def __missing__(self, entity: str) -> int:
        r = self[entity] = self._rank(entity)
        return r


class Scanner:
    """Runs detectors over text; ``allow`` values (case-insensitive) are never reported."""

    def __init__(
        self,
        detectors: Sequence[Detector],
        *,
        allow: Iterable[str] = (),
        custom: Iterable[str] = (),
        ner: Iterable[str] = (),
        shared: tuple[Sequence[str], Sequence[str], Sequence[Detector]] | None = None,
        encoded: SpanDecoder | None = None,
    ) -> None:
        """``shared``: (entity types, phone regions, the detectors among ``detectors``
        that ``builtin_detectors`` made of them), which a scanner process may run over
        part of a large text (``codemode.privacy.pool``); ``encoded``: the detector
        among ``detectors`` whose search for encoded spans it may run too (positions
        only: this scanner decodes and scans what it finds)."""
        self.detectors = list(detectors)
        self.allow = frozenset(a.strip().casefold() for a in allow if a.strip())
        self.custom = tuple(custom)
        custom_rank = {e: 1 for e in self.custom}
        base = {e: i + 2 for i, e in enumerate(PRIORITY[1:])}
        self._rank = {"SECRET": 0, **custom_rank, **base}
        self._last = len(PRIORITY) + 2
        self._ner = frozenset(ner)
        self.entities = tuple(dict.fromkeys(e for d in self.detectors for e in d.entities))
        self._ranks = _Ranks(self.rank)
        self._changing = [d for d in self.detectors if hasattr(d, "generation")]
        self._cache: OrderedDict[str, tuple[object, list[tuple[int, int, str]]]] = OrderedDict()
        self._cached_chars = 0
        self._cache_lock = threading.Lock()
        self._shared: tuple[tuple[str, ...], tuple[str, ...], list[Detector]] | None = None
        if shared is not None and shared[2]:
            entities, regions, builtins = shared
            self._shared = (tuple(entities), tuple(regions), list(builtins))
        self._encoded = encoded if self._shared is not None else None

    def generation(self) -> tuple[object, ...]:
        """The ``generation`` of each detector whose results may change over time."""
        return tuple(d.generation for d in self._changing)

    @property
    def line_local(self) -> bool:
        """Whether no detector finds a value spanning a line break (the stream scanner
        then releases complete lines at once). Detectors say so with ``line_local``;
        one that does not (custom patterns, NER, plugins) is assumed to span lines."""
        return all(getattr(d, "line_local", False) for d in self.detectors)

    @property
    def local_context(self) -> bool:
        """Whether what a detector finds at the start of a text depends, beyond the text,
        only on the text just before it when that one holds a word character (a key such
        as ``"phone"``): context words must end right before a value, and no detector
        matches across the NUL that joins texts. Custom patterns with context words look
        32 characters back, NER further: they say otherwise."""
        return all(getattr(d, "local_context", False) for d in self.detectors)

    def rank(self, entity: str) -> int:
        if entity in self._ner:
            return self._last + 1
        return self._rank.get(entity, 1)

    def spans(self, text: str) -> list[Span]:
        """Non-overlapping detections in ``text``, in order."""
        return [_new_span(Span, t) for t in self.spans_raw(text)]

    def spans_raw(self, text: str) -> list[tuple[int, int, str]]:
        """``spans`` as plain ``(start, end, entity)`` tuples (no object per value for
        the tens of thousands of a large result)."""
        if len(text) < CACHE_MIN:
            return self._resolve(text, self._found(text)) if text else []
        found: list[tuple[int, int, str]] = []
        for part in self.spans_parts(text):
            found.extend(part)
        return found

    def spans_parts(self, text: str) -> Generator[list[tuple[int, int, str]], None, None]:
        """``spans_raw(text)`` in one or two parts, in order (every span of the first
        before every span of the second). A large text split with the scanner process
        (see ``pool.py``) gives the host's part first, while the process still scans the
        rest: what the caller does with the first part (tokens, new strings) runs then,
        on the host's core, instead of after the process has answered."""
        if len(text) < CACHE_MIN:
            yield self.spans_raw(text)
            return
        generation = self.generation()
        with self._cache_lock:
            got = self._cache.get(text)
            if got is not None and got[0] == generation:
                self._cache.move_to_end(text)
                yield list(got[1])
                return
        found: list[tuple[int, int, str]] = []
        for part in self._parts(text):
            found.extend(part)
            yield part
        with self._cache_lock:
            old = self._cache.pop(text, None)
            if old is not None:
                self._cached_chars -= len(text)
            if len(text) <= CACHE_CHARS:
                self._cache[text] = (generation, found)
                self._cached_chars += len(text)
                while self._cached_chars > CACHE_CHARS:
                    dropped, _ = self._cache.popitem(last=False)
                    self._cached_chars -= len(dropped)

    def _found(self, text: str) -> list[tuple[int, int, str]]:
        """What every detector finds in ``text`` in this process, overlaps not resolved."""
        found: list[tuple[int, int, str]] = []
        with one_pass(text):  # the net's and the SSN detector's anchors: one RE2 pass
            for det in self.detectors:
                found.extend(det.find(text))
        return found

    @staticmethod
    def _marks(text: str) -> list[tuple[int, int, str]]:
        """The tokens already in ``text`` (entity ""): nothing is detected inside them."""
        if "[" not in text:
            return []
        return [(m.start(), m.end(), "") for m in TOKEN_RE.finditer(text)]

    def _parts(self, text: str) -> Iterator[list[tuple[int, int, str]]]:
        """The resolved spans of ``text`` (see ``spans_parts``); for a large text, the
        shared detectors' part from a scanner process."""
        shared = self._shared
        if shared is None or len(text) < POOL_MIN:
            yield self._resolve(text, self._found(text))
            return
        # Here, not at the top: the scanner process's module reads the encoded spans'
        # kinds, and encoded.py's detector is built on a Scanner (no import circle).
        from .pool import OVERLAP, pool_for

        sep = SEP if SEP in text else "\n"
        if (
            not (self.local_context if sep == SEP else self.line_local)
            or (pool := pool_for(shared[0], shared[1])) is None
            or (job := pool.submit(text, sep, decode=self._encoded is not None)) is None
        ):
            yield self._resolve(text, self._found(text))
            return
        split = job.split
        # The detectors run on the host's part only (the process runs them on its own):
        # the built-ins, and the encoded spans' search when the process answers those.
        encoded = self._encoded if job.decode else None
        builtins: list[Detector] = shared[2] if encoded is None else [*shared[2], encoded]
        found: list[tuple[int, int, str]] = []
        try:
            t0 = perf_counter()
            for det in self.detectors:
                if det not in builtins:
                    found.extend(det.find(text))
            t1 = perf_counter()
            head = text[: split + OVERLAP]
            for det in builtins:
                found.extend([f for f in det.find(head) if f[0] < split])
            marks = self._marks(text)
            ours = [f for f in found if f[0] < split]
            ours_marks = [f for f in marks if f[0] < split]
            # The host's part is resolved alone when nothing of it reaches the process's
            # (no cluster of overlapping candidates then spans the split).
            alone = not any(map(split.__lt__, map(_end, ours))) and not any(
                map(split.__lt__, map(_end, ours_marks))
            )
            if alone:
                resolved = self._resolve(text, ours, ours_marks)
                found = [f for f in found if f[0] >= split]
                marks = [f for f in marks if f[0] >= split]
        except BaseException:
            pool.abandon(job)
            raise
        if alone:
            try:
                yield resolved
            except BaseException:  # the caller failed (or stopped) meanwhile
                pool.abandon(job)
                raise
        # The process's parts, each resolved alone when nothing of it (nor of what the
        # host found there) reaches past its end; else it waits for the next.
        parts = pool.results(job, len(text), t1 - t0, perf_counter() - t1)
        try:
            for tail, spans, upto in parts:
                if spans and encoded is not None:  # decoded and scanned here
                    tail = tail if tail is None else tail + _finished(text, spans, encoded)
                if tail is None:  # the process failed: the rest scanned here (and logged)
                    off = upto - OVERLAP
                    rest = text[off:]
                    for det in builtins:
                        found.extend(
                            (s + off, e + off, x) for s, e, x in det.find(rest) if s >= OVERLAP
                        )
                    break
                if upto < len(text):
                    mine = [f for f in found if f[0] < upto]
                    mine_marks = [f for f in marks if f[0] < upto]
                    if not any(map(upto.__lt__, map(_end, tail))) and not any(
                        map(upto.__lt__, map(_end, mine + mine_marks))
                    ):
                        found = [f for f in found if f[0] >= upto]
                        marks = [f for f in marks if f[0] >= upto]
                        yield self._resolve(text, [*mine, *tail], mine_marks)
                        continue
                found.extend(tail)
        finally:
            parts.close()
        if found:
            yield self._resolve(text, found, marks)

    def _resolve(
        self,
        text: str,
        found: list[tuple[int, int, str]],
        marks: list[tuple[int, int, str]] | None = None,
    ) -> list[tuple[int, int, str]]:
        """``found``'s candidates with overlaps resolved; ``marks``: the tokens already
        in ``text`` (``_marks``; looked for here when not given)."""
        if not found:
            return []
        if marks is None:
            marks = self._marks(text)
        if any(map(ge, map(_start, found), map(_end, found))):
            found = [f for f in found if f[1] > f[0]]
        # Existing tokens are taken first (rank -1, entity ""): nothing is detected inside.
        tokens = len(marks)
        if tokens:
            found.extend(marks)
        found.sort()
        allow = self.allow
        if (
            not allow
            and not tokens
            and not any(map(gt, map(_end, found), map(_start, islice(found, 1, None))))
        ):
            # The common case, with no sweep: no candidate overlaps the next (nor, sorted,
            # any other), no token is among them and nothing is allowed.
            return found
        ranks = self._ranks
        out: list[tuple[int, int, str]] = []
        # Sweep clusters of overlapping candidates; most clusters hold one.
        i, n = 0, len(found)
        while i < n:
            j, reach = i + 1, found[i][1]
            while j < n and found[j][0] < reach:
                reach = max(reach, found[j][1])
                j += 1
            if j - i == 1:
                start, end, entity = found[i]
                if entity and not (allow and text[start:end].strip().casefold() in allow):
                    out.append(found[i])
            else:
                cluster = [(s, e, ranks[x] if x else -1, x) for s, e, x in found[i:j]]
                cluster.sort(key=lambda c: (c[2], c[0] - c[1], c[0]))
                taken: list[tuple[int, int]] = []
                for start, end, r, entity in cluster:
                    if any(start < e and s < end for s, e in taken):
                        continue
                    if r >= 0 and allow and text[start:end].strip().casefold() in allow:
                        continue
                    taken.append((start, end))
                    if r >= 0:
                        out.append((start, end, entity))
            i = j
        out.sort()
        return out


def _finished(
    text: str, spans: list[tuple[int, int, str]], encoded: SpanDecoder
) -> list[tuple[int, int, str]]:
    """The encoded spans a scanner process answered (start, end, kind), as ``encoded``
    reports them: decoded and scanned here, the strongest type found inside."""
    out = []
    for start, end, kind in spans:
        entity = encoded.finish(text, start, end, kind)
        if entity is not None:
            out.append((start, end, entity))
    return out
