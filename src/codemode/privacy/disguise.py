"""Personal data disguised with Unicode that a reader, human or model, reads through.

A zero-width space inside an address (``alice\\u200b@example.com``), digits of another
script or of full width (``４１１１ １１１１ ...``, ``٤١١١...``), a no-break space or a
Unicode hyphen between groups (``4111\\xa01111...``, ``123\\u201045\\u20106789``), a small
``﹫``, mathematical letters: the built-in detectors look for ASCII shapes and miss them,
while the model reads the value as plainly as the ASCII one.

``DisguiseDetector`` folds such characters, one by one, to what they read as (format
characters such as zero-width spaces, joiners, bidi controls, soft hyphens and variation
selectors are dropped, and so are combining marks over Latin letters; decimal digits of
any script become ASCII digits; spaces become ``" "`` and dashes ``"-"``; a character
whose NFKC form is one ASCII letter, digit or ``@.+-`` becomes that character; a
dot-like character between two ASCII letters or digits becomes ``"."``), runs the
other detectors over the folded text around each such character, and reports what they
find there at its place in the original text.
The token then stands for the text exactly as the tool returned it, so a sink gets the
original back.

Cheap when there is nothing to fold: ASCII text costs a flag check; other text one
regex search. Dot-like characters (``DOT_LIKES``: ``alice@example。com``) count only
inside a name's shape, with an ASCII letter or digit on each side once folded: IDNA reads
the ideographic full stops ``。｡`` as a domain's dots (so does Python's ``idna`` codec,
so a mail tool delivers such an address), and a model reads the others as dots, but a
Japanese or Chinese sentence ends with ``。`` after a character of its own script, which is
left alone (and costs no window). Each folded character opens a window of ``WINDOW``
characters each side (never past a line break or the NUL that joins texts), so a text full
of them is scanned about twice, no more; a dot-like one in CJK text only its non-CJK run
(prose with ``Python3。Windows`` on every line costs ~1.1-1.5 times its plain scan, not
2.6: ``benchmarks/privacy/bench_cjk_dots.py``). The windows are scanned in a few batches.
"""

from __future__ import annotations

import heapq
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from functools import cache
from itertools import chain
from typing import TYPE_CHECKING, NamedTuple

from ..invisible import PLANES, invisible_table

if TYPE_CHECKING:
    from .scan import Scanner

__all__ = ["DisguiseDetector", "fold", "folded_windows", "has_disguise", "unfold_span"]

WINDOW = 128
"""Characters of context folded and scanned each side of a disguised character."""
BATCH = 60_000
"""Characters of folded windows scanned at once: under the scanner's ``CACHE_MIN``, so a
batch is scanned here, never cached nor split with the scanner process."""
CONTEXT = 24
"""Characters kept before the run a dot-like character is in, when that run has a phone
number's digits: its context words (``電話``) are read in the 24 characters before it
(``codemode.privacy.phone``). Otherwise one is kept each side (what a value is glued to)."""
_CJK = (
    "\u2e80-\ua4cf"  # radicals, CJK symbols and punctuation, kana, ideographs, Yi
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff\ufe30-\ufe4f"  # compatibility ideographs and forms
    "\uff61-\uffdc"  # half-width katakana and Hangul
    "\U00020000-\U0003ffff"  # ideographs of the supplementary planes
)
"""Scripts written without spaces, where ``。`` ends a sentence after any word."""
_JOINT = "\x00" * 33
"""What joins the windows scanned together (see ``DisguiseDetector.find``): longer than
any look for context words before a value (24 characters for a phone number, 32 for a
custom recognizer's ``context``)."""
_PHONE_DIGITS = re.compile(r"(?:\D*\d){7}")
_ASCII = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ@.+-")
DOT_LIKES = (
    "\u3002\uff61\ufe12"  # ideographic full stops (IDNA label separators) and the vertical one
    "\u00b7\u0387\u2027\u2219\u22c5\u2e31\u2e33\u30fb\uff65"  # middle dots, raised dots
    "\u0589\u06d4\u0701\u0702\u1362"  # Armenian, Arabic, Syriac, Ethiopic full stops
)
"""Characters read as a dot that NFKC does not turn into one (``﹒`` and ``․`` it does)."""
_DOTS = frozenset(DOT_LIKES)
_NAME_CHAR = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DOT_IN_NAME = re.compile(f"(?<=[A-Za-z0-9])[{DOT_LIKES}](?=[A-Za-z0-9])")
_DIACRITICS = (
    (0x0300, 0x036F),
    (0x1AB0, 0x1AFF),
    (0x1DC0, 0x1DFF),
    (0x20D0, 0x20FF),
    (0xFE20, 0xFE2F),
)
"""Combining marks written over Latin letters (``a\u0337l\u0337i...``, or a decomposed
``Jose\u0301``): dropped, so the value is found under them. Marks of scripts that need
them (Devanagari, Arabic...) are left alone."""


@cache
def _tables() -> tuple[dict[int, str | None], _Hits]:
    """The fold of every character that has one, and where to find them (built once, in
    ~60 ms: a category per code point, NFKC only where a decomposition exists)."""
    table: dict[int, str | None] = dict(invisible_table())
    for a, b in _DIACRITICS:
        table.update(dict.fromkeys(range(a, b + 1)))
    category, decomposition = unicodedata.category, unicodedata.decomposition
    for lo, hi in PLANES:
        for cp in range(lo, hi):
            c = chr(cp)
            kind = category(c)
            if kind == "Nd":
                table[cp] = str(unicodedata.decimal(c))
            elif kind == "Zs":
                table[cp] = " "
            elif kind == "Pd":
                table[cp] = "-"
            elif kind[0] != "C" and decomposition(c):
                n = unicodedata.normalize("NFKC", c)
                if n in _ASCII:
                    table[cp] = n
    latin1 = "".join(chr(k) for k in table if k < 0x100) + "".join(
        c for c in DOT_LIKES if c < "\u0100"
    )
    bmp = _ranges(chain((k for k in table if k < 0x10000), map(ord, DOT_LIKES)))
    island = re.compile(f"(?:[^\\n\\x00{_CJK}]|[{bmp}])*")
    at = re.compile(f"[{_ranges([ord('@'), *(k for k, v in table.items() if v == '@')])}]")
    return table, _Hits(latin1, re.compile(f"[{bmp}]"), island, at)


class _Hits(NamedTuple):
    """Where the characters to fold are. ``re`` tests a class of BMP characters with a
    bitmap but one with astral ranges range by range (25 times slower per character), so
    astral characters (emoji, mostly) are found by one range and looked up one by one."""

    latin1: str
    bmp: re.Pattern[str]
    island: re.Pattern[str]
    """A run of characters but Chinese, Japanese and Korean ones (what folds is always
    in): what a dotted value (an address, a number, a name) may be written with."""
    at: re.Pattern[str]
    """An ``@`` or what folds to one."""

    def positions(self, text: str) -> Iterator[int]:
        try:
            text.encode("latin-1")
        except UnicodeEncodeError:
            pass
        else:
            if not any(c in text for c in self.latin1):
                return
        bmp = (
            m.start()
            for m in self.bmp.finditer(text)
            if m.group() not in _DOTS or _between_name_chars(text, m.start())
        )
        if _ASTRAL.search(text) is None:
            yield from bmp
            return
        table = _tables()[0]
        astral = (m.start() for m in _ASTRAL.finditer(text) if ord(m.group()) in table)
        yield from heapq.merge(bmp, astral)


_ASTRAL = re.compile("[\\U00010000-\\U0010ffff]")


def _between_name_chars(text: str, at: int) -> bool:
    """Whether the dot-like character at ``at`` has an ASCII letter or digit on each side
    (a neighbour that itself folds, ``ｅｘａｍｐｌｅ。``, is a hit whose window holds it)."""
    return 0 < at < len(text) - 1 and text[at - 1] in _NAME_CHAR and text[at + 1] in _NAME_CHAR


def _ranges(codes: Iterable[int]) -> str:
    """The body of a regex class holding ``codes``."""
    ranges: list[list[int]] = []
    for cp in sorted(codes):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return "".join(
        re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in ranges
    )


def fold(text: str) -> tuple[str, list[int] | None]:
    """``text`` folded, and the original index of each folded character (None when no
    character was dropped: the indices are then the same)."""
    table, _ = _tables()
    folded = text.translate(table)
    if not folded.isascii():
        folded = _DOT_IN_NAME.sub(".", folded)
    if len(folded) == len(text):
        return folded, None
    if "\x00" in text:  # (windows never hold one: they stop at the NUL joining texts)
        return folded, [i for i, c in enumerate(text) if table.get(ord(c), c) is not None]
    # In C: the dropped characters marked by a NUL, and the runs of indices between them.
    dropped = [m.start() for m in _NUL.finditer(text.translate(_marks()))]
    starts = [0, *map((1).__add__, dropped)]
    kept = list(chain.from_iterable(map(range, starts, [*dropped, len(text)])))
    return folded, kept


_NUL = re.compile("\x00")


@cache
def _marks() -> dict[int, str]:
    """The characters ``fold`` drops, as NUL."""
    return {cp: "\x00" for cp, to in _tables()[0].items() if to is None}


class DisguiseDetector:
    """What ``inner`` finds once disguising characters are folded (see module doc)."""

    line_local = True
    local_context = True

    def __init__(self, inner: Scanner) -> None:
        self.inner = inner
        self.entities = inner.entities

    @property
    def generation(self) -> tuple[object, ...]:
        return self.inner.generation()

    def find(self, text: str) -> Iterator[tuple[int, int, str]]:
        """The windows are scanned together, in batches under ``BATCH`` characters: each
        scan has a fixed cost (every detector's set-up), which one scan per window paid
        once per line of a text with a hit on every line. NULs join them (which end every
        value, as between the texts of a result), more than any detector looks back for
        context words, so no window reads another's as its own: each is scanned as it
        was alone."""
        batch: list[tuple[int, int, str, list[int] | None]] = []
        size = 0
        for window in folded_windows(text):
            if size + len(window[2]) >= BATCH and batch:
                yield from self._scan(text, batch)
                batch, size = [], 0
            batch.append(window)
            size += len(window[2]) + len(_JOINT)
        if batch:
            yield from self._scan(text, batch)

    def _scan(
        self, text: str, windows: list[tuple[int, int, str, list[int] | None]]
    ) -> Iterator[tuple[int, int, str]]:
        starts: list[int] = []
        at = 0
        for window in windows:
            starts.append(at)
            at += len(window[2]) + len(_JOINT)
        joined = _JOINT.join(window[2] for window in windows)
        for start, end, entity in self.inner.spans_raw(joined):
            i = bisect_right(starts, start) - 1
            lo, hi, folded, kept = windows[i]
            start -= starts[i]
            end -= starts[i]
            if end > len(folded):  # across a joint: a custom pattern's ``.*``
                continue
            original = text[lo:hi]
            s, e = unfold_span(original, kept, start, end)
            if original[s:e] != folded[start:end]:
                yield lo + s, lo + e, entity


def folded_windows(text: str) -> Iterator[tuple[int, int, str, list[int] | None]]:
    """``(lo, hi, folded, kept)`` of each window of ``text`` around its disguising
    characters: ``text[lo:hi]`` folded, and ``fold``'s map back into it. Nothing for an
    ASCII text (a flag check). Also what the held-values search looks at
    (``known.KnownValues``)."""
    if text.isascii():
        return
    for lo, hi in _windows(text, _tables()[1].positions(text)):
        folded, kept = fold(text[lo:hi])
        yield lo, hi, folded, kept


def has_disguise(text: str) -> bool:
    """Whether ``text`` holds a character ``fold`` changes (one C pass, or a few)."""
    return not text.isascii() and next(_tables()[1].positions(text), None) is not None


def unfold_span(text: str, kept: list[int] | None, start: int, end: int) -> tuple[int, int]:
    """The span of ``text`` that ``start``..``end`` of its fold reads (``kept`` from
    ``fold``): from its first kept character to its last and the marks over that one
    (a token followed by a lone combining mark would draw it over the token's ``]``)."""
    if kept is None:
        return start, end
    stop = kept[end - 1] + 1
    limit = kept[end] if end < len(kept) else len(text)
    while stop < limit and unicodedata.category(text[stop]) in _MARKS:
        stop += 1
    return kept[start], stop


_MARKS = frozenset(("Mn", "Me"))


def _windows(text: str, where: Iterator[int]) -> Iterator[tuple[int, int]]:
    """Merged windows of ``WINDOW`` characters each side of every hit, within its line.

    A dot-like hit's window is narrower: the run around it up to Chinese, Japanese or
    Korean characters (what a value it may be a dot of is written with; in Latin text,
    the whole window), a character or two each side, and ``CONTEXT`` before a run with a
    phone number's digits (its context words, as ``電話``). A run with an ``@`` keeps the
    whole window: a mail address's local part and domain may hold letters of any script.
    Chinese and Japanese prose (``我用的是Python3。Windows也可以``) then costs a few
    characters a line, not a second scan of the line."""
    n = len(text)
    hits = _tables()[1]
    lo = hi = -1
    # The next line break and NUL after the last hit, each looked for again only once a
    # hit is past it (a text full of hits is read once, not ``WINDOW`` times per hit).
    lf = nul = -1
    for at in where:
        if at >= lf:
            lf = text.find("\n", at + 1)
            lf = n if lf < 0 else lf
        if at >= nul:
            nul = text.find("\x00", at + 1)
            nul = n if nul < 0 else nul
        end = min(at + 1 + WINDOW, lf, nul)
        if text[at] in _DOTS:
            floor = max(0, at - WINDOW)
            left = at - _run(hits.island, text[floor:at][::-1], 0, at - floor)
            right = at + 1 + _run(hits.island, text, at + 1, end)
            if hits.at.search(text, left, right):  # a mail address: any script around it
                start = at - WINDOW
            else:
                margin = CONTEXT if _PHONE_DIGITS.match(text, left, right) else 1
                start = max(floor, left - margin)
                end = min(end, right + 2)
        else:
            start = at - WINDOW
        if at >= hi:
            if hi > lo:
                yield lo, hi
            lo = max(start, _line_start(text, at))
        hi = max(hi, end)
    if hi > lo:
        yield lo, hi


def _run(pattern: re.Pattern[str], text: str, pos: int, endpos: int) -> int:
    """How many characters from ``pos`` on ``pattern`` (a ``[...]*``) matches."""
    m = pattern.match(text, pos, endpos)
    return m.end() - pos if m is not None else 0


def _line_start(text: str, at: int) -> int:
    floor = max(0, at - WINDOW)
    return max(text.rfind("\n", floor, at), text.rfind("\x00", floor, at)) + 1
