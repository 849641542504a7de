"""Characters a reader does not see, and text as a receiving program may read it.

A zero-width space, a joiner, a bidi control, a soft hyphen or a variation selector
changes a string's bytes but not what a person or a model reads, and IDNA (UTS 46) drops
most of them from a domain name. Code that compares a value with a pattern (policy
argument rules) or looks for personal data in it (privacy) must read through them.
"""

from __future__ import annotations

import unicodedata
from functools import cache

__all__ = ["invisible", "invisible_table", "loose"]

_INVISIBLE = (
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x115F, 0x1160),  # Hangul fillers
    (0x180B, 0x180D),  # Mongolian variation selectors
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)


PLANES = ((0x80, 0x30000), (0xE0000, 0xE1000))
"""The code points that can hold such characters (past these, none is assigned)."""


def invisible(cp: int) -> bool:
    """Whether code point ``cp`` is a format character (``Cf``) or one of the other
    characters that show nothing (variation selectors, fillers)."""
    return cp in invisible_table()


@cache
def invisible_table() -> dict[int, None]:
    """A ``str.translate`` table that drops every invisible character (built once, in
    ~30 ms: one C call per code point)."""
    category = unicodedata.category
    table: dict[int, None] = {
        cp: None for lo, hi in PLANES for cp in range(lo, hi) if category(chr(cp)) == "Cf"
    }
    for a, b in _INVISIBLE:
        table.update(dict.fromkeys(range(a, b + 1)))
    return table


_IDNA_DOTS = {0x3002: "."}
"""After NFKC (which turns ``．`` into ``.`` and ``｡``, ``︒`` into ``。``), the ideographic
full stop IDNA (UTS 46) and Python's ``idna`` codec read as a domain's dot:
``x@rival。example`` is delivered to ``rival.example``."""


def loose(text: str) -> str:
    """``text`` as a lenient receiver may read it: NFKC (full-width and other compatibility
    forms), invisible characters dropped, ideographic full stops read as dots (IDNA), case
    folded, surrounding spaces and trailing dots (a fully qualified domain name) dropped."""
    if not text.isascii():
        text = (
            unicodedata.normalize("NFKC", text).translate(invisible_table()).translate(_IDNA_DOTS)
        )
    return text.casefold().strip().rstrip(".").strip()
