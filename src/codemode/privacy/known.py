"""Values the vault holds, found again where no detector would recognise them.

A detector finds a value in its context: a bare 10-digit number is a phone under
``"phone"`` and an order id elsewhere; a name is a ``PERSON`` only where a NER model
says so; a custom recognizer may need a context word. Once the vault has issued a token
for such a value, codemode knows it is personal data, and the same value returned by
another tool (as a plain field, or inside free text) must get the same token.

``KnownValues.find(texts)`` returns, per text, the spans of held values, looked for in
the distinct texts only (one ``set`` of them, in C: notes from a few templates are
searched once):

- a whole text equal to a held value of ``MIN_WHOLE``+ characters: a set intersection
  with the vault's value -> token map itself (no copy of it);
- a held value of ``MIN_INSIDE``+ characters inside a longer text, standing alone (no
  letter or digit right before or after it). With a few held values, ``value in text``
  each (a C search, below ``FIND_MAX`` values); with more, the texts' words (runs of
  ASCII letters and digits, from one ``bytes.translate`` and ``split``) are read in
  runs of one, two and three (``zip`` in C) and looked up in an index of a window of
  up to three consecutive words of each value (one no other value has, if it can); a
  value is searched for only when its window is there. Phone numbers share their words
  ("555", area codes) but rarely three in a row, so a new page of a table costs one
  pass over its words, however many values the vault holds. Nothing is O(held values x text) past
  ``FIND_MAX``, except values with no ASCII letter or digit (another script), searched
  one by one. The index grows with the values the vault took since the last scan (its
  dict keeps them in order): no rebuild.

A held value disguised with Unicode (a zero-width space in it, full-width or another
script's digits, soft hyphens, combining marks...: what ``disguise.DisguiseDetector``
folds for the detectors) is found too, with ``disguised`` (the engine's ``decode``): the
windows of text around such characters are folded the same way and searched as texts
are, and each match is mapped back to the text as it is, so the token stands for that
exact span (its own token, as for the disguise detector: a sink gets the text back as
the tool returned it). An ASCII text costs a flag check; a Latin-1 one a few C searches.

Why the minimums: fields of 1-3 characters are codes (``"US"``, ``"CA"``, ``"yes"``,
``"N/A"``), and no built-in detector issues a value that short (an IPv4 address has 7+
characters, a phone 7+ digits); inside free text, 4-5 characters ("Anna", "Main") are too
often part of ordinary prose. A value that is one lower-case word ("active", "street":
a NER model's or a deny-list's mistake) is never searched for: it would turn every
occurrence of an ordinary word into a token. Matching is exact (case-sensitive).

The index follows the vault: one ``KnownValues`` per ``Privacy`` engine, so per
workspace and tenant (or per client session with ``vault.scope: session``); values of
another tenant's vault are never looked at.
"""

from __future__ import annotations

import bisect
import string
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from itertools import accumulate, chain, compress, count, filterfalse, islice, repeat
from operator import getitem
from typing import TypeVar, cast

from .disguise import folded_windows, has_disguise, unfold_span
from .scan import Span
from .tokens import ID_LENGTH

_T = TypeVar("_T")

__all__ = [
    "FEW",
    "FIND_MAX",
    "INDEX_SOON_MIN",
    "MIN_DIGITS",
    "MIN_INSIDE",
    "MIN_WHOLE",
    "SEARCH_MAX",
    "KnownValues",
    "replace_spans",
    "resolve_held",
    "with_held",
]

MIN_WHOLE = 4
"""Characters a held value needs to be found as a whole text (a JSON string value)."""
MIN_INSIDE = 6
"""Characters a held value needs to be found inside a longer text."""
MIN_DIGITS = 6
"""Digits a held value made of digits only needs (a PIN "2024" would turn every year in
a result into a token)."""
FIND_MAX = 48
"""Held values searched one by one (``value in text``); past this, by their words."""
INDEX_SOON_MIN = 2_000
"""New held values from which ``index_soon`` starts a thread (fewer cost less than it)."""
FEW = 64
"""Texts up to which ``find`` first checks whether any could hold a held value at all
(a run's output: its keys and empty streams), not to wait for the index meanwhile."""
SEARCH_MAX = 64
"""Values the word windows leave that are searched for in all the texts at once; past
this, text by text."""

_SEP = "\x00"
# Words are runs of ASCII letters and digits: every other byte (punctuation, control
# characters, and the bytes of any non-ASCII character, such as "«" or "é") splits, in
# values and texts alike.
_ALNUM = (string.ascii_letters + string.digits).encode()
_PUNCT = bytes(b for b in range(256) if b not in _ALNUM)
_TO_SPACE = bytes.maketrans(_PUNCT, b" " * len(_PUNCT))


def _unsearchable(values: list[str]) -> set[str]:
    """The values of ``values`` that are not looked for again (see the module doc: digits
    only and shorter than ``MIN_DIGITS``, shorter than ``MIN_WHOLE``, one lower-case word,
    or holding a NUL), in C passes (no Python call
    per value; the 20,000 values of a large result are checked as one): most are long and
    not one lower-case word, so each test reads a few of them only."""
    short = list(compress(values, map(MIN_DIGITS.__gt__, map(len, values))))
    bad = set(filter(str.isdigit, short))
    bad.update(compress(short, map(MIN_WHOLE.__gt__, map(len, short))))
    bad.update(filter(str.islower, filter(str.isalpha, values)))
    if _SEP in "".join(values):
        bad.update(v for v in values if _SEP in v)
    return bad


def _none_can_hold(texts: list[str]) -> bool:
    """Whether no text can be or hold a held value: each is ASCII with no NUL, and too
    short or one lower-case word (a held value standing alone inside one would be all of
    it, and such a value is never searched for)."""
    joined = _SEP.join(texts)
    return (
        joined.isascii()
        and joined.count(_SEP) == len(texts) - 1
        and (len(_unsearchable(texts)) == len(set(texts)))
    )


def _words(text: str) -> list[bytes]:
    return text.encode("utf-8", "surrogatepass").translate(_TO_SPACE).split()


_ENTITY = slice(1, -(ID_LENGTH + 2))
"""A vault token's entity type: ``[EMAIL_k7d2m9x4qp]`` -> ``EMAIL``."""


class KnownValues:
    """Finds the values of one vault's ``held`` map (value -> token) in texts."""

    def __init__(
        self,
        held: Mapping[str, str],
        generation: Callable[[], int] = int,
        *,
        disguised: bool = True,
    ) -> None:
        self._held = held
        self._generation = generation
        """Changes when values were taken out of ``held`` (the index starts again)."""
        self._seen_generation = generation()
        self._size = 0
        self._lock = threading.Lock()
        self._indexer: threading.Thread | None = None
        self._indexer_lock = threading.Lock()
        self._inside: list[str] = []
        self._windows: dict[int, dict[tuple[bytes, ...], list[str]]] = {}
        """{m: {m consecutive words of a value: the values}}, m = 1, 2 or 3 (``_window``)."""
        self._wordless: list[str] = []
        self._entity: dict[str, str] = {}
        """{held value: its entity type} of the values looked for (not ``_unsearchable``)."""
        self.disguised = disguised
        """Also look through Unicode disguises (``_disguised``)."""

    def _index(self) -> None:
        """Index the values of ``MIN_INSIDE``+ characters the vault took since the last
        look (its dict keeps them in the order they came: only the new ones are read,
        in a few C passes, no rebuild per call)."""
        held = self._held
        generation = self._generation()
        if generation != self._seen_generation:  # values were purged: index them afresh
            self._seen_generation = generation
            self._size = 0
            self._inside, self._windows, self._wordless, self._entity = [], {}, [], {}
        size = len(held)
        if size == self._size:
            return
        # Copied first, in one C call: another thread may add to the vault meanwhile.
        new = list(islice(held, self._size, size))
        self._size = size
        if bad := _unsearchable(new):  # (C passes: no call per value)
            new = list(filterfalse(bad.__contains__, new))
        # ``get``: a purge in another thread may have taken some out since (the next look
        # sees its generation and starts again).
        tokens = list(map(held.get, new))
        new = list(compress(new, tokens))
        kinds = cast("Iterator[str]", map(getitem, filter(None, tokens), repeat(_ENTITY)))
        self._entity.update(zip(new, kinds, strict=True))
        new = list(compress(new, map(MIN_INSIDE.__le__, map(len, new))))
        if not new:
            return
        self._inside.extend(new)
        encoded = map(str.encode, new, repeat("utf-8"), repeat("surrogatepass"))
        words = list(map(bytes.split, map(bytes.translate, encoded, repeat(_TO_SPACE))))
        windows = self._windows
        runs3 = windows.setdefault(3, {})
        for v, ws in zip(new, words, strict=True):
            n = len(ws)
            if n > 3:  # the common case (an e-mail, a phone), inline: ``_window``'s first try
                at = ws.index(max(ws, key=len))
                lo = at - 2 if at > 2 else 0  # (at most n - 3)
                key = tuple(ws[lo : lo + 3])
                table = runs3
                if key in table:
                    key = _window(ws, table)
            elif n:
                key = tuple(ws)
                table = windows.setdefault(n, {})
            else:  # no ASCII letter or digit (another script): searched one by one
                self._wordless.append(v)
                continue
            got = table.get(key)
            if got is None:
                table[key] = [v]
            else:
                got.append(v)

    def index_soon(
        self, around: Callable[[], AbstractContextManager[object]] = nullcontext
    ) -> None:
        """Index the values the vault took since the last look in a background thread,
        when there are ``INDEX_SOON_MIN`` or more: a tool result that issued 20,000 tokens
        costs their indexing (~40 ms) while the sandbox reads it, not in the next scan (the
        run's own output, on the event loop). Only ahead of time: ``find`` indexes
        whatever is new first, and waits for this one when it is under way. ``around``:
        what the indexing runs in (the engine pauses the garbage collector, as for a
        scan: the index's tuples would trigger passes over a heap holding the result)."""
        if len(self._held) - self._size < INDEX_SOON_MIN:
            return
        with self._indexer_lock:
            if self._indexer is not None:
                return  # under way; what it misses, the next ``find`` indexes
            indexer = self._indexer = threading.Thread(
                target=self._index_behind, args=(around,), name="codemode-known-index", daemon=True
            )
        indexer.start()

    def _index_behind(self, around: Callable[[], AbstractContextManager[object]]) -> None:
        try:
            with self._lock, around():
                self._index()
        finally:
            with self._indexer_lock:
                self._indexer = None

    def find(
        self, texts: list[str]
    ) -> tuple[dict[int, str], dict[int, list[tuple[int, int, str]]]]:
        """({index: entity} of the texts that are a held value, {index: [(start, end,
        entity), ...] in order, not overlapping} of the texts holding some inside)."""
        if not self._held:
            return {}, {}
        if len(texts) <= FEW and _none_can_hold(texts):
            return {}, {}  # (a run's output of a few keys: no wait for the index)
        with self._lock:  # one scan at a time reads (and grows) the index
            return self._find(texts)

    def _find(
        self, texts: list[str]
    ) -> tuple[dict[int, str], dict[int, list[tuple[int, int, str]]]]:
        self._index()
        entity = self._entity
        # Distinct texts (one C pass; notes from a few templates are searched once).
        distinct = set(texts)
        are = _common(distinct, entity)
        distinct -= are
        found: dict[str, list[tuple[int, int, str]]] = {}
        if self._inside:
            found = self._inside_texts(
                list(compress(distinct, map(MIN_INSIDE.__lt__, map(len, distinct))))
            )
        disguised: dict[str, str] = {}
        # (``isascii`` reads a flag: an ASCII batch pays one C pass over its texts)
        if self.disguised:
            other = list(filterfalse(str.isascii, distinct))
            # (the texts as one: a batch with nothing to fold costs a few C passes)
            if other and has_disguise(_SEP.join(other)):
                disguised = self._disguised(other, found)
        out: dict[int, str] = {}
        for is_whole, of in ((are, entity), (disguised, disguised)):
            if is_whole:
                at = list(compress(count(), map(is_whole.__contains__, texts)))
                out.update(zip(at, map(of.__getitem__, map(texts.__getitem__, at)), strict=True))
        if not found:
            return out, {}
        got = list(map(found.get, texts))
        return out, dict(zip(compress(count(), got), filter(None, got), strict=True))

    def _disguised(
        self, texts: list[str], found: dict[str, list[tuple[int, int, str]]]
    ) -> dict[str, str]:
        """{text: entity} of the texts that are a held value disguised with Unicode (a
        zero-width space in ``555\\u200b1234567``, full-width digits, no-break spaces...),
        and the disguised held values inside the others added to ``found``, at their
        place in the text as it is (the token replaces it exactly). The windows around
        disguising characters are folded as ``disguise.DisguiseDetector`` folds them and
        searched as texts are; an ASCII text costs a flag check, a Latin-1 one a few C
        searches for the Latin-1 characters a fold changes."""
        entity = self._entity
        whole: dict[str, str] = {}
        windows: dict[str, list[tuple[str, int, int, list[int] | None]]] = {}
        for text in texts:
            for lo, hi, folded, kept in folded_windows(text):
                if hi - lo == len(text) and folded in entity:  # the whole text
                    whole[text] = entity[folded]
                    break
                if len(folded) > MIN_INSIDE:
                    windows.setdefault(folded, []).append((text, lo, hi, kept))
        for text in whole:
            found.pop(text, None)
        if not windows or not self._inside:
            return whole
        for folded, spans in self._inside_texts(list(windows)).items():
            for text, lo, hi, kept in windows[folded]:
                if text in whole:
                    continue
                new = []
                window = text[lo:hi]
                for a, b, kind in spans:
                    start, end = unfold_span(window, kept, a, b)
                    start, end = lo + start, lo + end
                    if text[start:end] != folded[a:b]:  # (as it is: the plain search's)
                        new.append((start, end, kind))
                if new:
                    have = found.get(text, [])
                    new = [n for n in new if not any(n[0] < h[1] and h[0] < n[1] for h in have)]
                    found[text] = sorted([*have, *new])
        return whole

    def _inside_texts(self, texts: list[str]) -> dict[str, list[tuple[int, int, str]]]:
        """{text: spans} for the texts holding a held value inside them."""
        joined = _SEP.join(texts)
        if len(self._inside) <= FIND_MAX:
            return self._locate(texts, joined, [v for v in self._inside if v in joined])
        # A value standing alone in a text has its words among the text's, in a row (no
        # letter or digit glues to its ends): its window of up to three words (``_window``)
        # is a run of the texts' words. One C pass over those runs per window length
        # leaves the values worth a search, whatever the number of values held (phone
        # numbers share their words, "555", area codes; rarely three in a row).
        words = _words(joined)
        candidates: list[str] = []
        for m, table in self._windows.items():
            # (shorter iterators end it: a run of m words ends with the last word)
            runs = zip(*(islice(words, i, None) for i in range(m)), strict=False)
            for key in set(filter(table.__contains__, runs)):
                candidates.extend(table[key])
        candidates.sort()  # one order whatever the sets' (equal-length overlaps: first wins)
        wordless = [v for v in self._wordless if v in joined]
        if len(candidates) <= SEARCH_MAX:
            return self._locate(texts, joined, candidates + wordless)
        # Many values inside the texts (a mailing list pasted into a note): each text is
        # matched against the candidates on its own words, so no value is searched for
        # in all the texts.
        anchors: dict[bytes, list[tuple[str, set[bytes]]]] = {}
        for v in candidates:
            ws = _words(v)
            anchors.setdefault(max(ws, key=len), []).append((v, set(ws)))
        out = self._locate(texts, joined, wordless) if wordless else {}
        for text in texts:
            have = set(_words(text))
            found = [
                v
                for w in _common(have, anchors)
                for v, vw in anchors[w]
                if have.issuperset(vw) and v in text
            ]
            if found:
                spans = self._locate([text], text, found).get(text, [])
                if text in out:  # wordless values found there too: theirs go first
                    taken = out[text]
                    spans = [
                        sp for sp in spans if not any(sp[0] < e and s < sp[1] for s, e, _ in taken)
                    ]
                    spans = sorted([*taken, *spans])
                if spans:
                    out[text] = spans
        return out

    def _locate(
        self, texts: list[str], joined: str, values: list[str]
    ) -> dict[str, list[tuple[int, int, str]]]:
        """{text: spans} of ``values`` (each in ``joined``, ``texts`` joined by NUL)
        where they stand alone, the longer first where two overlap."""
        if not values:
            return {}
        values.sort(key=len, reverse=True)
        starts = list(accumulate((len(t) + 1 for t in texts), initial=0))
        per: dict[int, list[tuple[int, int, str]]] = {}
        taken: dict[int, list[tuple[int, int]]] = {}
        for v in values:
            entity = self._entity[v]
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


def _window(words: list[bytes], table: Mapping[tuple[bytes, ...], list[str]]) -> tuple[bytes, ...]:
    """Up to three consecutive words of a value, those around its longest word first
    (a phone's last digits, an e-mail's name): the first run no other value has, else
    the one fewest share. Any run of a value's words would do, as all of them are in a
    row in a text that holds it; a shared run ("1 212 555", "mail example net") would
    send many values to be searched for."""
    if len(words) <= 3:
        return tuple(words)
    runs = len(words) - 2
    at = words.index(max(words, key=len))
    lo, hi = max(0, at - 2), min(at, runs - 1)  # the runs that hold the longest word
    key = tuple(words[lo : lo + 3])
    if key not in table:  # the common case, with no loop
        return key
    best: tuple[bytes, ...] = ()
    fewest = -1
    for i in chain(range(lo, hi + 1), range(lo), range(hi + 1, runs)):
        key = (words[i], words[i + 1], words[i + 2])
        got = table.get(key)
        if got is None:
            return key
        if fewest < 0 or len(got) < fewest:
            best, fewest = key, len(got)
    return best


def _common(items: set[_T], mapping: Mapping[_T, object]) -> set[_T]:
    """The items that are keys of ``mapping``, iterating the smaller of the two."""
    if len(items) <= len(mapping):
        return set(filter(mapping.__contains__, items))
    return set(filter(items.__contains__, mapping))


def with_held(spans: list[Span], known: KnownValues, text: str) -> list[Span]:
    """``spans`` (the detectors') and the held values in ``text``, overlaps resolved by
    ``resolve_held``: what ``Privacy.protect`` replaces in the same text."""
    whole, inside = known.find([text])
    held = [(0, len(text), e) for e in whole.values()] or inside.get(0, [])
    if not held:
        return spans
    return [Span(a, b, e) for a, b, e in resolve_held(spans, held)]


def resolve_held(
    detected: Sequence[tuple[int, int, str]], held: Sequence[tuple[int, int, str]]
) -> list[tuple[int, int, str]]:
    """The spans to replace in one text, from the detectors' (run on the whole text) and
    the held values' (each list in order, not overlapping). Where they overlap, the
    longest span's entity names one span covering them all: a detected value that holds a
    held one is one token (held ``Anna Lee`` in a detected ``Anna Lee Smith``: never
    ``[PERSON_1] Smith``), a held value longer than what a detector found keeps its token,
    and of spans that only partly overlap no part stays in clear. An equal span is the
    held value's (its token, whatever a detector now calls it)."""
    if not detected:
        return list(held)
    # (start, end, held first on a tie of length, entity): sorted by start
    spans = sorted([(a, b, 0, e) for a, b, e in held] + [(a, b, 1, e) for a, b, e in detected])
    out: list[tuple[int, int, str]] = []
    i, n = 0, len(spans)
    while i < n:
        j, reach = i + 1, spans[i][1]
        while j < n and spans[j][0] < reach:
            reach = max(reach, spans[j][1])
            j += 1
        if j - i == 1:
            a, b, _, e = spans[i]
        else:
            cluster = spans[i:j]
            _, _, _, e = min(cluster, key=lambda c: (c[0] - c[1], c[2]))
            a = cluster[0][0]
            b = reach
        out.append((a, b, e))
        i = j
    return out


_JOINERS = frozenset(".-_+@'%/")
"""Characters that join two runs of letters or digits into one value (an e-mail's local
part, a hyphenated name, a domain): a held value may not end at one."""


def _alone(text: str, start: int, end: int) -> bool:
    """The value stands alone at ``start``..``end``: no letter or digit right beside it,
    nor a joiner with one beyond. "Anna Lee" is not found in "Hanna Leeds" nor in
    "Anna Lee-Smith", "5551234567" not in "15551234567", "bob@example.org" not in
    "alice.bob@example.org" (that longer value is the detectors' to find, whole)."""
    return not (start and _glues(text, start - 1, start - 2)) and not (
        end < len(text) and _glues(text, end, end + 1)
    )


def _glues(text: str, at: int, beyond: int) -> bool:
    """Whether ``text[at]``, beside a value, makes it part of a longer one."""
    c = text[at]
    return c.isalnum() or (c in _JOINERS and 0 <= beyond < len(text) and text[beyond].isalnum())


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
