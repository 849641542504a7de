"""Characters a reader does not see, and text as a receiving program may read it.

A zero-width space, a joiner, a bidi control, a soft hyphen or a variation selector
changes a string's bytes but not what a person or a model reads, and IDNA (UTS 46) drops
most of them from a domain name. Code that compares a value with a pattern (policy
argument rules) or looks for personal data in it (privacy) must read through them.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from urllib.parse import unquote

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
    folded, surrounding spaces and trailing dots (a fully qualified domain name) dropped;
    in a URL, its host as a URL parser reads it (:func:`_url`)."""
    text = _loose(text, dots=False)
    return _url(text) if "://" in text else text.rstrip(".").strip()


def _loose(text: str, *, dots: bool = True) -> str:
    if not text.isascii():
        text = (
            unicodedata.normalize("NFKC", text).translate(invisible_table()).translate(_IDNA_DOTS)
        )
    text = text.casefold().strip()
    return text.rstrip(".").strip() if dots else text


_URL = re.compile(r"([a-z][a-z0-9+.-]*://)(.*)", re.DOTALL)
_SPECIAL = frozenset(("http://", "https://", "ws://", "wss://", "ftp://", "file://"))
_TAB_OR_NEWLINE = str.maketrans("", "", "\t\n\r")


def _url(text: str) -> str:
    """A URL as WHATWG URL parsers (browsers, Node's ``fetch``) read it: tabs and newlines
    dropped; in http(s), ws(s), ftp and file URLs a backslash is a slash
    (``https://rival.example\\@ok.example/`` is rival.example); the authority's
    percent-escapes decoded (``rival%2Eexample``) and read again as above, its user info
    dropped (``https://ok.example@rival.example/`` is rival.example), the host's
    trailing dots dropped (``rival.example.`` names the same site); the path's dot
    segments resolved (``/public/%2e%2e/admin`` is ``/admin``)."""
    m = _URL.match(text.translate(_TAB_OR_NEWLINE))
    if m is None:
        return text
    scheme, rest = m.groups()
    if scheme in _SPECIAL:
        rest = rest.replace("\\", "/")
    end = next((i for i, c in enumerate(rest) if c in "/?#"), len(rest))
    authority, rest = rest[:end], rest[end:]
    if "%" in authority:
        authority = _loose(unquote(authority))
    hostport = authority.rpartition("@")[2]
    if not hostport.startswith("["):  # an IPv6 literal has no name to end in a dot
        host, colon, port = hostport.partition(":")
        hostport = host.rstrip(".") + colon + port
    cut = next((i for i, c in enumerate(rest) if c in "?#"), len(rest))
    # Without its user info: ``https://ok.example@rival.example/`` goes to rival.example.
    return scheme + hostport + _without_dot_segments(rest[:cut]) + rest[cut:]


def _without_dot_segments(path: str) -> str:
    """``path`` with its ``.`` and ``..`` segments (also written ``%2e``) resolved."""
    if "." not in path and "%2e" not in path:
        return path
    parts = path.split("/")[1:]
    out: list[str] = []
    for i, part in enumerate(parts):
        dots = part.replace("%2e", ".")
        if dots in (".", ".."):
            if dots == ".." and out:
                out.pop()
            if i == len(parts) - 1:
                out.append("")
            continue
        out.append(part)
    return "/" + "/".join(out)
