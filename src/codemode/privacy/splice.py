"""Where each value found in the NUL-joined text of a result's strings lies, and the
strings rebuilt with tokens in place: the arithmetic of one scan, kept apart from the
engine's policy because it is where a large result's time goes."""

from __future__ import annotations

import bisect
import re
from collections import Counter
from itertools import accumulate, compress, repeat
from operator import add, ge, itemgetter, sub

SEP = "\x00"
"""Joins a value's strings into one text (a NUL: no detector matches across it)."""
REPEAT_MIN = 64
"""Texts this long are scanned once per distinct (context, text) in a value."""
CONTEXT = 32
"""Characters before a text that detectors may look at (context words, keys)."""
_WORD = re.compile(r"\w")
_TAIL = itemgetter(slice(-CONTEXT, None))  # a text's last CONTEXT characters


def locate(
    pieces: list[str],
    joined: str,
    ss: list[int],
    ts: list[int],
    origin: tuple[int, int] | None = None,
    values: list[str] | None = None,
) -> tuple[list[int], list[int]] | None:
    """(``kr``, ``bases``) of the values ``ss[i]``..``ts[i]`` (sorted) of ``joined``
    (``pieces`` joined by NUL): value ``i`` is in piece ``kr[i] - 1``, which starts at
    ``bases[i]``; None if a value crosses from one piece into the next.

    When no piece holds a NUL itself (the common case), a value is in the piece after as
    many NULs as precede it (counted between one value and the next: each character
    once), it crosses if a NUL is inside it, and its piece starts after the last NUL
    before it: no offsets of the 100,000 pieces of a large result are needed.

    ``origin``: (a position before ``ss[0]``, the ``kr`` of a value there), given by a
    caller that knows no piece holds a NUL (values located part by part: each part's
    NULs are counted from the previous part's last value, not from the start).
    ``values``: the text of each value, when the caller has it.
    """
    if origin is None:
        if joined.count(SEP) != len(pieces) - 1:
            return _locate_by_offsets(pieces, ss, ts)
        origin = (0, 1)
    # A value holding a NUL crosses into the next piece. With the values' texts, they are
    # looked through at once (a search per value costs more than a copy of them all).
    if values is not None:
        if SEP in "".join(values):
            return None
    elif max(map(joined.find, repeat(SEP), ss, ts)) >= 0:
        return None
    since, k = origin
    kr = list(accumulate(map(joined.count, repeat(SEP), [since, *ss[:-1]], ss), initial=k))[1:]
    bases = list(map(add, map(joined.rfind, repeat(SEP), repeat(0), ss), repeat(1)))
    return kr, bases


def _locate_by_offsets(
    pieces: list[str], ss: list[int], ts: list[int]
) -> tuple[list[int], list[int]] | None:
    """``locate`` from the offset of every piece (any piece may hold a NUL)."""
    starts = list(accumulate(map(add, map(len, pieces), repeat(1)), initial=0))
    kr = list(map(bisect.bisect_right, repeat(starts), ss))
    if any(map(ge, ts, map(starts.__getitem__, kr))):
        return None
    return kr, list(map(starts.__getitem__, map(sub, kr, repeat(1))))


def rebuild(
    texts: list[str],
    bases: list[int],
    kr: list[int],
    ss: list[int],
    ts: list[int],
    tokens: list[str],
) -> dict[int, str]:
    """{index: new text}: value ``i`` (``ss[i]``..``ts[i]`` in the joined text, in text
    ``kr[i] - 1``, which starts there at ``bases[i]``, in order) replaced by
    ``tokens[i]``."""
    out: dict[int, str] = {}
    n = len(kr)
    if len(set(kr)) == n:  # one value per text: no grouping
        for k, base, a, b, token in zip(kr, bases, ss, ts, tokens, strict=True):
            text = texts[k - 1]
            if a == base and b - a == len(text):
                out[k - 1] = token  # the whole text is the value
            else:
                out[k - 1] = text[: a - base] + token + text[b - base :]
        return out
    i = 0
    while i < n:
        k = kr[i]
        j = i + 1
        while j < n and kr[j] == k:
            j += 1
        base, text = bases[i], texts[k - 1]
        parts: list[str] = []
        pos = 0
        for m in range(i, j):
            parts.append(text[pos : ss[m] - base])
            parts.append(tokens[m])
            pos = ts[m] - base
        parts.append(text[pos:])
        out[k - 1] = "".join(parts)
        i = j
    return out


def pieces(texts: list[str]) -> tuple[list[str], dict[int, int]]:
    """(the pieces to join, {repeated text: its first occurrence}) of ``texts``: a text
    of ``REPEAT_MIN``+ characters seen before right after the same text (the same key:
    the notes of many rows from a few templates) is only its last ``CONTEXT``
    characters, so the text after it keeps the context it had (for detectors whose
    context is local, ``Scanner.local_context``: the caller's to check)."""
    # (A comprehension: ``len`` and the comparison are specialised there, half the time
    # of ``map`` passes over the lengths, and it gives the long texts' places at once.)
    at = [i for i, text in enumerate(texts) if len(text) >= REPEAT_MIN]
    if not at:
        return texts, {}  # a table of short fields has no long text
    longs = list(map(texts.__getitem__, at))
    times = Counter(longs)
    if len(times) == len(longs):
        return texts, {}  # no long text comes twice (C passes, no loop per text)
    # Only a text that comes more than once can be a copy (a CRM export's notes,
    # mostly unique, cost no Python step each), and only after a text that ends in a
    # word (a key: ``_WORD``, looked for once per distinct end); the first of each
    # (end before it, text) is found by ``dict.setdefault`` in a C pass.
    again = list(compress(at, map((1).__lt__, map(times.__getitem__, longs))))
    if again and again[0] == 0:
        again = again[1:]  # (the first text has nothing before it)
    befores = list(map(_TAIL, map(texts.__getitem__, map(sub, again, repeat(1)))))
    word = {b: _WORD.search(b) is not None for b in set(befores)}
    keep = list(map(word.__getitem__, befores))
    again, befores = list(compress(again, keep)), list(compress(befores, keep))
    seen: dict[tuple[str, str], int] = {}
    firsts = map(seen.setdefault, zip(befores, map(texts.__getitem__, again), strict=True), again)
    copies = {i: first for i, first in zip(again, firsts, strict=True) if first != i}
    if not copies:
        return texts, {}
    out = list(texts)
    for i in copies:
        out[i] = texts[i][-CONTEXT:]
    return out, copies


def copy_repeats(
    out: dict[int, str],
    copies: dict[int, int],
    kr: list[int],
    entities: list[str],
    counts: Counter[str],
) -> None:
    """A repeated text gets the new text of its first occurrence, and its values are
    counted again."""
    firsts = set(copies.values()) & out.keys()
    if not firsts:
        return
    by_text: dict[int, list[str]] = {}
    for k, entity in zip(kr, entities, strict=True):
        if k - 1 in firsts:
            by_text.setdefault(k - 1, []).append(entity)
    for c, first in copies.items():
        if first in out:
            out[c] = out[first]
            counts.update(by_text[first])


__all__ = ["CONTEXT", "REPEAT_MIN", "SEP", "copy_repeats", "locate", "pieces", "rebuild"]
