"""Characters a reader does not see, and text as a receiving program may read it.

A zero-width space, a joiner, a bidi control, a soft hyphen or a variation selector
changes a string's bytes but not what a person or a model reads, and IDNA (UTS 46) drops
most of them from a domain name. Code that compares a value with a pattern (policy
argument rules) or looks for personal data in it (privacy) must read through them.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from functools import cache
from urllib.parse import unquote

from .ipv4in6 import embedded_v4

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
    if hostport.startswith("["):
        end = hostport.find("]")
        hostport = _ipv6(hostport[1:end]) + hostport[end + 1 :] if end > 0 else hostport
    else:
        host, colon, port = hostport.partition(":")
        host = host.rstrip(".")
        hostport = (_ipv4(host) or host) + colon + port
    cut = next((i for i, c in enumerate(rest) if c in "?#"), len(rest))
    # Without its user info: ``https://ok.example@rival.example/`` goes to rival.example.
    return scheme + hostport + _without_dot_segments(rest[:cut]) + rest[cut:]


def _ipv4(host: str) -> str | None:
    """``host`` as the IPv4 address a WHATWG parser reads in it (``2852039166``,
    ``0xa9.0xfe.0xa9.0xfe``, ``0251.0376.0251.0376`` and ``169.254.43518`` are all
    169.254.169.254), or None when it is a name."""
    parts = host.split(".")
    if not parts[-1] or not parts[-1][0].isdigit() or len(parts) > 4:
        return None
    numbers = []
    for part in parts:
        if part[:2] == "0x":
            base, digits = 16, part[2:]
        elif part[:1] == "0" and len(part) > 1:
            base, digits = 8, part[1:]
        else:
            base, digits = 10, part
        if digits and not (digits.isascii() and digits.isalnum()):
            return None
        try:
            numbers.append(int(digits or "0", base))
        except ValueError:
            return None
    last = numbers.pop()
    if any(not 0 <= n <= 255 for n in numbers) or not 0 <= last < 256 ** (4 - len(numbers)):
        return None
    value = sum(n << (8 * (3 - i)) for i, n in enumerate(numbers)) + last
    return str(ipaddress.IPv4Address(value))


def _ipv6(literal: str) -> str:
    """``[literal]`` compressed (``[::1]``), or the IPv4 address it carries: mapped
    (``[::ffff:a9fe:a9fe]``), 6to4 (``[2002:a9fe:a9fe::]``), NAT64 (``[64:ff9b::a9fe:a9fe]``)
    and IPv4-compatible (``[::a9fe:a9fe]``) all reach 169.254.169.254."""
    try:
        address = ipaddress.IPv6Address(literal)
    except ValueError:
        return f"[{literal}]"
    v4 = embedded_v4(address)
    return str(v4) if v4 is not None else f"[{address}]"


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
