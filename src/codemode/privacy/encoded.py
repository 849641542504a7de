"""Personal data that reaches the model encoded: base64, hex, URL (``%40``), escaped
(``\\u0040``, ``\\x40``, ``&#64;``) or in full-width forms (``alice＠example．com``).

``EncodedDetector`` finds spans that look encoded, decodes each one and runs the other
detectors over the decoded text; when they find something, the whole encoded span is
reported, as the strongest type found inside (``[EMAIL_...]`` for a base64 blob that
holds an e-mail). The token stands for the encoded text exactly as the tool returned
it, so a sink gets the original blob back.

Bounded by construction: candidates do not overlap and decoding never makes text
longer, so each level of decoding scans at most the text's length again; decoded text
is itself searched for encodings ``depth`` times (base64 of URL-encoded text), no more.
Cheap when there is nothing encoded: escapes and ``%`` are found from their literal
first characters; base64 and hex runs from one ``bytes.translate`` of the text and
``bytes.find`` of a run of 16 alphabet characters (C speed, no regex per position).
A run must decode to printable UTF-8 before anything is scanned in it: random ids,
hashes and binary data are dropped after one decode attempt.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from .onebyte import one_byte

if TYPE_CHECKING:
    from .scan import Scanner

__all__ = ["KINDS", "EncodedDetector", "candidates", "decode_escapes"]

MIN_RUN = 16
"""Shortest base64/hex run decoded: 12 bytes of base64, 8 of hex (``a.b@c.de`` is 8)."""
WINDOW = 256
"""How far an escaped or %-encoded span extends from one escape (each side)."""
PRINTABLE = 0.9
"""Share of printable characters decoded text needs before it is scanned."""
WRAPPED = 40
"""Shortest line of base64 wrapped over lines (MIME uses 76, PEM 64)."""

_B64 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_"
_RUN_TABLE = bytes(0x61 if c in _B64 else 0x2E for c in range(256))  # alphabet -> "a"
_RUN = b"a" * MIN_RUN

_PCT = re.compile(r"%[0-9A-Fa-f]{2}")
_PCT_SPAN = re.compile(r"(?:[\w.~+!*'@-]|%[0-9A-Fa-f]{2})+")

_ESC = r"\\u[0-9A-Fa-f]{4}|\\x[0-9A-Fa-f]{2}|&#[0-9]{1,7};|&#[xX][0-9A-Fa-f]{1,6};"
_ESC_HIT = re.compile(_ESC)
_ESC_SPAN = re.compile(rf"(?:[\w.+'@-]|{_ESC})+")
_ESC_ONE = re.compile(
    r"\\u([0-9A-Fa-f]{4})|\\x([0-9A-Fa-f]{2})|&#([0-9]{1,7});|&#[xX]([0-9A-Fa-f]{1,6});"
)
_SURROGATE = re.compile("[\ud800-\udfff]")

# Full-width forms (U+FF01-FF5E: "alice＠example．com") read as ASCII after NFKC.
_WIDE_HIT = re.compile("[\uff01-\uff5e]")
_WIDE_SPAN = re.compile("[\\w.+@'\\-\uff01-\uff5e]+")


class EncodedDetector:
    """Encoded spans whose decoded text holds what ``inner`` detects (see module doc)."""

    line_local = True  # base64 wrapped over lines: the stream scanner holds such lines
    local_context = True

    def __init__(self, inner: Scanner, *, depth: int = 2) -> None:
        from .scan import Scanner

        self.inner = inner
        self.entities = inner.entities
        if depth > 1:
            nested = EncodedDetector(inner, depth=depth - 1)
            self.scanner = Scanner(
                [*inner.detectors, nested], allow=inner.allow, custom=inner.custom
            )
        else:
            self.scanner = inner

    @property
    def generation(self) -> tuple[object, ...]:
        return self.scanner.generation()

    def find(self, text: str) -> Iterator[tuple[int, int, str]]:
        for start, end, _, decoded in candidates(text):
            entity = self.entity_of(decoded)
            if entity is not None:
                yield start, end, entity

    def entity_of(self, decoded: str) -> str | None:
        """The strongest type the detectors find in ``decoded``; None if they find none."""
        spans = self.scanner.spans(decoded)
        if not spans:
            return None
        return min((sp.entity for sp in spans), key=self.inner.rank)

    def finish(self, text: str, start: int, end: int, kind: str) -> str | None:
        """``entity_of`` the span ``start``..``end`` of ``text`` that ``candidates`` gave
        as ``kind`` (in a scanner process, which answers positions only: the host decodes
        the few that decode and scans them with every detector, its own net included)."""
        raw = text[start:end]
        if kind == "run":
            decoded = _decode_run("".join(raw.split()))
        else:
            decoded = _DECODERS[kind](raw)
            if decoded == raw:
                decoded = None
        return self.entity_of(decoded) if decoded else None


def candidates(text: str) -> Iterator[tuple[int, int, str, str]]:
    """(start, end, kind, decoded text) of every span of ``text`` that decodes to text;
    ``kind`` among ``KINDS``, how it was decoded (``EncodedDetector.finish``)."""
    if "%" in text:
        for start, end, decoded in _spans(text, _PCT, _PCT_SPAN, _unquote):
            yield start, end, "pct", decoded
    # ("&" first: one character is a memchr; "&#" is a slower search, 6 us in 10 KB)
    if "\\" in text or ("&" in text and "&#" in text):
        for start, end, decoded in _spans(text, _ESC_HIT, _ESC_SPAN, decode_escapes):
            yield start, end, "esc", decoded
    if _has_wide(text):
        for start, end, decoded in _spans(text, _WIDE_HIT, _WIDE_SPAN, _narrow):
            yield start, end, "wide", decoded
    if len(text) >= MIN_RUN:
        for start, end, decoded in _runs(text):
            yield start, end, "run", decoded


def _has_wide(text: str) -> bool:
    """Whether ``text`` holds a full-width form; without a regex pass over text that is
    ASCII (a flag of the string: free) or Latin-1 (one copy at C speed)."""
    if text.isascii():
        return False
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return _WIDE_HIT.search(text) is not None
    return False


def _spans(
    text: str,
    hit: re.Pattern[str],
    span: re.Pattern[str],
    decode: Callable[[str], str],
) -> Iterator[tuple[int, int, str]]:
    """Around each ``hit`` (an escape), the run of ``span`` characters it is part of,
    at most ``WINDOW`` characters each side, decoded."""
    last = 0
    for m in hit.finditer(text):
        if m.start() < last:
            continue
        # The run of span characters that ends at the hit: scanned forwards over the
        # window (each character once), never by a backwards search (quadratic).
        start = m.start()
        for lo in span.finditer(text, max(last, m.start() - WINDOW), m.start()):
            if lo.end() == m.start():
                start = lo.start()
        hi = span.match(text, m.end(), min(len(text), m.end() + WINDOW))
        end = hi.end() if hi is not None else m.end()
        last = end
        decoded = decode(text[start:end])
        if decoded and decoded != text[start:end]:
            yield start, end, decoded


def _runs(text: str) -> Iterator[tuple[int, int, str]]:
    """Runs of 16+ base64/hex characters that decode to printable text; base64 wrapped
    over lines (MIME: lines of 4k characters, 40 or more) counts as one run."""
    # One byte per character (``one_byte``), so byte offsets are character offsets.
    marks = one_byte(text).translate(_RUN_TABLE)
    n = len(marks)
    find = marks.find
    pos = find(_RUN)
    while pos != -1:
        line = pos
        end = find(b".", pos + MIN_RUN)
        if end == -1:
            end = n
        if end == n or text[end] not in "\r\n=":
            # The common case (a card number, an IBAN, an id): a run on one line with no
            # padding, decoded as it is, with none of the checks below for wrapped lines.
            # Digits that cannot be hex of text (see ``_decode_run``) need no call.
            run = text[pos:end]
            if not (run.isdigit() and (len(run) % 2 or run[::2].strip("23"))):
                decoded = _decode_run(run)
                if decoded is not None:
                    yield pos, end, decoded
            pos = find(_RUN, end)
            continue
        width = end - pos  # wrapped lines all have the first one's width, but the last
        nxt = end + _newline(text, end)
        if nxt > end and nxt < n and marks[nxt] == 0x61:
            after = _run_end(marks, nxt)
            if after - nxt > width and after - nxt >= WRAPPED and (after - nxt) % 4 == 0:
                # A first line shorter than the next: the end of a line whose start is not
                # in this text (the stream scanner's context), or a run of its own. It is
                # decoded alone; the block from the next, whole line.
                alone = _decode_run(text[pos:end])
                if alone is not None:
                    yield pos, end, alone
                pos, line, end, width = nxt, nxt, after, after - nxt
        while width >= WRAPPED and width % 4 == 0 and end - line == width:
            nl = _newline(text, end)
            nxt = end + nl
            if not nl or nxt >= n or marks[nxt] != 0x61:
                break
            line, end = nxt, _run_end(marks, nxt)
        for _ in range(2):  # its padding is part of the span
            if end < n and text[end] == "=":
                end += 1
        run = text[pos:end]
        decoded = _decode_run("".join(run.split()) if line != pos else run)
        if decoded is not None:
            yield pos, end, decoded
        pos = marks.find(_RUN, end)


def _newline(text: str, at: int) -> int:
    return 2 if text.startswith("\r\n", at) else 1 if text.startswith("\n", at) else 0


def _run_end(marks: bytes, start: int) -> int:
    end = marks.find(b".", start)
    return len(marks) if end == -1 else end


def _decode_run(run: str) -> str | None:
    if run.isdigit():
        # Only hex of printable ASCII digits/punctuation ("3431..." is "41..."): every
        # other digit a 2 or a 3 (``strip`` leaves nothing then; no set per run).
        if len(run) % 2 or run[::2].strip("23"):
            return None
        return _text(bytes.fromhex(run))
    if len(run) % 2 == 0 and _is_hex(run) and _may_start_utf8(run):
        got = _text(bytes.fromhex(run))
        if got is not None:
            return got
    if len(run) <= 64 and run.upper() == run:
        # No lower-case letter: an IBAN, a code, an id. Base64 of text this short
        # almost always has one (the first of each 4 characters of ASCII is A-Z or a-f).
        return None
    body = run.rstrip("=")
    padded = body + "=" * (-len(body) % 4)
    try:
        if "-" in body or "_" in body:
            data = base64.urlsafe_b64decode(padded)
        else:
            data = base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return None
    return _text(data)


_HEX = "0123456789abcdefABCDEF"


def _may_start_utf8(hexrun: str) -> bool:
    """False when the first byte that ``hexrun`` spells cannot begin UTF-8 (``_text``
    refuses such bytes): a continuation byte (8x to Bx), or a lead byte (Cx to Fx) not
    followed by one. An IBAN of DE or BE (``DE68...``, ``BE71...``) is no hex of text,
    told from two characters instead of a decode."""
    lead = hexrun[0]
    if lead in "89ABab":
        return False
    return lead not in "CDEFcdef" or (len(hexrun) >= 4 and hexrun[2] in "89ABab")


def _is_hex(run: str) -> bool:
    """Every character a hex digit (``strip`` of them leaves nothing: no set per run)."""
    return not run.strip(_HEX)


_CONTROL = dict.fromkeys([*range(9), 11, 12, *range(14, 32), 127])


def _text(data: bytes) -> str | None:
    """``data`` as text if it is UTF-8 and mostly printable (not an id, hash or image)."""
    # Most runs that decode at all (hex of an IBAN, a hash) are not UTF-8: told without
    # raising an exception each (a third of the detector's time on a table of IBANs). A
    # U+FFFD that the bytes did not spell out marks an error a strict decode raises on.
    text = data.decode("utf-8", "replace")
    if "\ufffd" in text:
        if b"\xef\xbf\xbd" not in data:
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not text:
        return None
    if text.isprintable():
        return text
    control = len(text) - len(text.translate(_CONTROL))
    return text if control <= (1 - PRINTABLE) * len(text) else None


def _narrow(text: str) -> str:
    import unicodedata

    return unicodedata.normalize("NFKC", text)


def _unquote(text: str) -> str:
    from urllib.parse import unquote_plus

    return unquote_plus(text)


def decode_escapes(text: str) -> str:
    """``\\uXXXX``, ``\\xXX`` and ``&#...;`` escapes as the characters they stand for."""

    def one(m: re.Match[str]) -> str:
        u, x, dec, hexa = m.groups()
        code = int(u or x or hexa, 16) if dec is None else int(dec)
        return chr(code) if code < 0x110000 else m.group()

    out = _ESC_ONE.sub(one, text)
    if _SURROGATE.search(out):  # pairs written as two \\uXXXX
        out = out.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return out


KINDS = ("pct", "esc", "wide", "run")
"""How ``candidates`` decoded a span: %-encoding, escapes, full-width forms, base64/hex."""
_DECODERS: dict[str, Callable[[str], str]] = {
    "pct": _unquote,
    "esc": decode_escapes,
    "wide": _narrow,
}
