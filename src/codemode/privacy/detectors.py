"""Detectors of personal data that run offline, with no model to download.

A detector has ``entities`` (the types it reports) and ``find(text)``, which yields
``(start, end, entity)`` spans; the scanner (``codemode.privacy.scan``) resolves overlaps.
Each built-in detector first finds candidates with a regular expression, then checks
them the way the number's issuer would:

=============  ==============================================================
EMAIL          local part, ``@``, a domain with a top-level label
PHONE          ``phonenumbers``: a possible number in its region (international
               with ``+``/``00``, or national for the configured regions); a bare
               run of digits counts only after a context word ("Tel.", "phone");
               in ``codemode.privacy.phone``
CREDIT_CARD    length and issuer prefix, Luhn, consistent groups
US_SSN         ``ddd-dd-dddd`` as issued (``stdnum.us.ssn``: no 000/666/9xx area)
IBAN           country format and mod-97 check (``stdnum.iban``)
IP_ADDRESS     IPv4 and IPv6 (``ipaddress``)
=============  ==============================================================

Why not Presidio: its ``AnalyzerEngine`` always loads an NLP engine (and downloads a
spaCy model when it is missing); its package requires spaCy; its e-mail recognizer uses
``tldextract``, which fetches the public suffix list at run time. Its pattern
recognizers are thin regexes over the same checks made here with ``phonenumbers`` and
``python-stdnum``, two small, well-kept, pure-Python libraries of numbering rules.
Names and addresses need a language model: ``codemode.privacy.ner`` (optional).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from codemode.literals import Anchors

from .iban import IBANDetector
from .onebyte import one_byte
from .phone import PHONE_CONTEXT, PhoneDetector
from .words import CARD_WORDS, word_before

__all__ = [
    "BUILTIN_ENTITIES",
    "PHONE_CONTEXT",
    "CardDetector",
    "DenyList",
    "Detector",
    "EmailDetector",
    "IBANDetector",
    "IPDetector",
    "PhoneDetector",
    "RegexDetector",
    "SSNDetector",
    "builtin_detectors",
]

BUILTIN_ENTITIES = ("EMAIL", "PHONE", "CREDIT_CARD", "US_SSN", "IBAN", "IP_ADDRESS")

Span = tuple[int, int, str]


class Detector(Protocol):
    """Finds one or more entity types in a text."""

    @property
    def entities(self) -> tuple[str, ...]: ...

    def find(self, text: str) -> Iterable[Span]: ...


# --------------------------------------------------------------------------- e-mail

_LOCAL_REVERSED = re.compile(r"[\w.%+'-]{1,64}")  # the local part, read backwards
_DOMAIN = re.compile(
    r"(?:[^\W_](?:[\w-]{0,61}[^\W_])?\.)+[^\W\d_]{2,24}(?![\w-]|\.[^\W_])",
)


class EmailDetector:
    """``local@domain.tld``: found from each ``@`` outwards (fast when there are few)."""

    entities = ("EMAIL",)
    line_local = True
    local_context = True

    def find(self, text: str) -> Iterator[Span]:
        at = text.find("@")
        if at == -1:
            return
        # The local part is the run of its characters that ends at the "@": matched
        # forwards in the reversed text (a backwards search would try every start).
        rev = text[::-1]
        n = len(text)
        while at != -1:
            m = _LOCAL_REVERSED.match(rev, n - at)
            if m is not None:
                start = at - (m.end() - m.start())
                while start < at and text[start] in ".-'+%":
                    start += 1
                d = _DOMAIN.match(text, at + 1)
                if start < at and d is not None:
                    yield start, d.end(), "EMAIL"
                    at = text.find("@", d.end())
                    continue
            at = text.find("@", at + 1)


# --------------------------------------------------------------------------- cards

_CARD = re.compile(r"\d(?<![\w.+/-]\d)\d{3}(?:[ -]?\d){8,15}(?![\w]|[./-]\d)")
_CARD_GROUPS = {(4, 4, 4, 4), (4, 4, 4, 4, 3), (4, 6, 5), (4, 6, 4), (4, 4, 4, 1), (4, 4, 4, 3)}
_CARD_GROUPS |= {(4, 4, 4, 2), (4, 4, 4, 4, 2), (4, 4, 4, 4, 1), (4, 4, 5)}


def _card_brand_ok(digits: str) -> bool:
    """Issuer prefix and length of the major schemes (Visa, Mastercard, Amex, Discover,
    Diners, JCB, UnionPay, Maestro, Mir): by a table of the lengths each ASCII four-digit
    prefix allows, filled as prefixes come (a look-up instead of three ``int`` each)."""
    head = digits[:4]
    lengths = _BRAND_LENGTHS.get(head)
    if lengths is None:
        if not head.isascii():
            return _brand_ok(digits)
        lengths = _BRAND_LENGTHS[head] = frozenset(
            n for n in range(12, 20) if _brand_ok(head.ljust(n, "0"))
        )
    return len(digits) in lengths


_BRAND_LENGTHS: dict[str, frozenset[int]] = {}
"""At most 10,000 entries (ASCII prefixes of four digits)."""


def _brand_ok(digits: str) -> bool:
    n = len(digits)
    p2, p3, p4 = int(digits[:2]), int(digits[:3]), int(digits[:4])
    if digits[0] == "4":
        return n in (13, 16, 19)
    if 51 <= p2 <= 55 or 2221 <= p4 <= 2720:
        return n == 16
    if p2 in (34, 37):
        return n == 15
    if p4 == 6011 or 644 <= p3 <= 649 or p2 == 65 or p2 == 62:
        return 16 <= n <= 19
    if 300 <= p3 <= 305 or p2 in (36, 38, 39):
        return 14 <= n <= 19
    if p2 == 35:  # JCB (3528-3589 issued; generators use all of 35xx)
        return 16 <= n <= 19
    if p4 in (1800, 2131):
        return n == 15
    if 2200 <= p4 <= 2204:
        return 16 <= n <= 19
    if p2 == 50 or 56 <= p2 <= 69:
        return 16 <= n <= 19
    return False


_LUHN_DOUBLE = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)


def _luhn_ok(digits: str) -> bool:
    if digits.isascii():  # as bytes: the doubled digits by a table, the sums in C
        raw = digits.encode()
        odd, even = raw[-1::-2], raw[-2::-2]
        return (sum(odd) - 48 * len(odd) + sum(even.translate(_LUHN_BYTES))) % 10 == 0
    total = sum(map(int, digits[-1::-2])) + sum(_LUHN_DOUBLE[int(c)] for c in digits[-2::-2])
    return total % 10 == 0


# An ASCII digit's byte -> the digit doubled, its two digits summed (only digits reach it).
_LUHN_BYTES = bytes(_LUHN_DOUBLE[c - 0x30] if 0x30 <= c <= 0x39 else 0 for c in range(256))


# Where a card can be: one byte per character (ASCII digits and any non-ASCII
# character, which may be another script's digit -> "d"; the separators " " and "-" ->
# "s"; the rest -> "."). Every card the checks below accept holds four digits, a
# separator, four more and then a separator and a digit or two more digits and a
# separator (all accepted groupings start 4, 4, x or 4, 6, x), or twelve digits in a
# row: found in the mask at C speed instead of by a regex try at every digit (and a SKU
# such as "1234-5678" is no seed).
_CARD_MASK = bytes(
    0x64 if chr(c).isdigit() or c == 0x3F or c > 0x7F else 0x73 if c in b" -" else 0x2E
    for c in range(256)
)
# The seeds as one pattern with a literal prefix (found by a fast scan for "dddd").
_CARD_SEED = re.compile(rb"dddd(?:sdddd(?:sd|dds)|d{8})")
# Most text is ASCII or Latin-1, which holds no digit beyond ASCII: there "d" is an ASCII
# digit only ("?", which may stand for another script's character, -> "D": the mask
# above is used instead). A card then starts where a run of digits does (the pattern's
# look-behind: a digit glues it), so a seed does too, and a run of more than 16 digits
# with no separator after its twelfth (an IBAN's, an id) holds no seed of a card.
_CARD_ASCII = bytes(
    0x64 if 0x30 <= c <= 0x39 else 0x73 if c in b" -" else 0x44 if c == 0x3F else 0x2E
    for c in range(256)
)
_CARD_SEED_ASCII = re.compile(rb"dddd(?<!ddddd)(?:sdddd(?:sd|dds)|d{8}(?!d{5}))")


def _glued(c: str) -> bool:
    """Whether a number right after ``c`` is part of a word, path or number (``[\\w.+/-]``)."""
    return c.isalnum() or c in "_.+/-"


# A card glued to one of them: the pattern without its look at what precedes the number.
_CARD_AT = re.compile(r"\d{4}(?:[ -]?\d){8,15}(?![\w]|[./-]\d)")


class CardDetector:
    """Payment card numbers: issuer prefix and length, Luhn, and consistent grouping."""

    entities = ("CREDIT_CARD",)
    line_local = True
    local_context = True

    def find(self, text: str) -> Iterator[Span]:
        """The pattern runs only on the runs of digits and separators around a seed of the
        mask, and not even there when the bytes say no card fits: fewer than twelve
        digits (a SKU, a date), or plain ASCII digits with no separator that are more
        than 16 (bare cards are at most 16; the pattern cannot start or end inside a
        run) or glued to what comes before (the pattern's look-behind: an IBAN's digits
        after its letters). A bare run of 12 to 16 ASCII digits is checked without it."""
        if len(text) < 12:
            return
        raw = one_byte(text)
        mask, seeds = raw.translate(_CARD_ASCII), _CARD_SEED_ASCII
        if b"D" in mask:
            mask, seeds = raw.translate(_CARD_MASK), _CARD_SEED
        n = len(mask)
        rfind, find, count = mask.rfind, mask.find, mask.count
        pos = 0
        # Every seed in one pass (a search call per seed costs more); those inside a
        # region already looked at are passed over.
        for hit in [m.start() for m in seeds.finditer(mask)]:
            if hit < pos:
                continue
            start = rfind(b".", 0, hit) + 1
            end = pos = find(b".", hit)
            if end == -1:
                end = pos = n
            digits = count(b"d", start, end)
            if digits < 12:
                continue
            if digits == end - start:
                run = text[start:end]
                if run.isascii() and run.isdigit():
                    if digits > 16 or (
                        start
                        and _glued(text[start - 1])
                        and not word_before(text, start, CARD_WORDS)
                    ):
                        continue
                    # What the pattern finds in a bare run, without it: the whole run,
                    # unless a word character or "./" and a digit follow it (its lookahead).
                    after = text[end : end + 1]
                    if after and (
                        after.isalnum()
                        or after == "_"
                        or (after in "./" and text[end + 1 : end + 2].isdecimal())
                    ):
                        continue
                    if _card_brand_ok(run) and _luhn_ok(run):
                        yield start, end, "CREDIT_CARD"
                    continue
                # "?" or another script's digit: let the pattern see
            # The lookahead sees two characters past the run, as on the whole text.
            stop = min(len(text), end + 2)
            if start and text[start - 1].isalpha() and word_before(text, start, CARD_WORDS):
                m = _CARD_AT.match(text, start, stop)
                if m is not None and _card_ok(m.group()):
                    yield start, m.end(), "CREDIT_CARD"
                    start = m.end()
            yield from self._find(text, start, stop)

    def _find(self, text: str, start: int, end: int) -> Iterator[Span]:
        # ``_CARD.finditer(text, start, end)`` as searches: a finditer object costs more
        # than the search itself, once per card of a large text.
        search = _CARD.search
        while (m := search(text, start, end)) is not None:
            start = m.end()
            if _card_ok(m.group()):
                yield m.start(), m.end(), "CREDIT_CARD"


def _card_ok(raw: str) -> bool:
    """A match of ``_CARD``: one kind of separator, grouped as cards are, issuer, Luhn."""
    sep = " " if " " in raw else "-" if "-" in raw else ""
    if sep and ("-" if sep == " " else " ") in raw:
        return False  # mixed separators
    digits = raw.replace(sep, "") if sep else raw
    if not 12 <= len(digits) <= 19 or (not sep and len(digits) > 16):
        return False  # long runs of bare digits are ids far more often than cards
    if sep and tuple(len(g) for g in raw.split(sep)) not in _CARD_GROUPS:
        return False
    return _card_brand_ok(digits) and _luhn_ok(digits)


# --------------------------------------------------------------------------- US SSN

# Found from its "-dd-dddd" tail (a literal "-" first: a fast scan), then checked
# backwards for its three-digit area and a clean start.
_SSN_TAIL = re.compile(r"-\d\d-\d{4}(?![\w]|[./-]\d)")
_SSN_WORDS = ("SSN", "ssn", "Ssn", "SS#", "ss#", "ocial")
# One pass with RE2, shared with the credentials net's anchors (``literals.one_pass``).
_SSN_ANCHORS = Anchors([(w, False) for w in _SSN_WORDS], shared=True)
# After the word, nine bare digits, or the issued shape glued to it ("SSN123-45-6789",
# which the tail's look at what precedes it refuses: a letter glues a number to a word).
_SSN_BARE = re.compile(
    r"(?i)(?:ssn|social\s+security(?:\s+(?:number|no\.?))?|ss#)\W{0,4}"
    r"(?:(\d{9})(?!\w)|(\d{3}-\d{2}-\d{4})(?![\w]|[./-]\d))"
)


def _ssn_valid(area: str, group: str, serial: str) -> bool:
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


class SSNDetector:
    """US Social Security numbers as issued; nine bare digits, or the issued shape glued
    to a letter, only right after "SSN" (or "social security")."""

    entities = ("US_SSN",)
    line_local = True
    local_context = True

    def find(self, text: str) -> Iterator[Span]:
        for m in _SSN_TAIL.finditer(text):
            start = m.start() - 3
            area = text[start : m.start()] if start >= 0 else ""
            if len(area) != 3 or not area.isdigit() or not area.isascii():
                continue
            if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_.+/-"):
                continue
            raw = text[start : m.end()]
            if _ssn_valid(raw[:3], raw[4:6], raw[7:]):
                yield start, m.end(), "US_SSN"
        possible = _SSN_ANCHORS.possible(text)
        words = _SSN_WORDS if possible is None else [w for w, _ in possible]
        if not any(w in text for w in words):
            return
        for m in _SSN_BARE.finditer(text):
            d = m.group(1)
            if d is not None:
                if _ssn_valid(d[:3], d[3:5], d[5:]):
                    yield m.start(1), m.end(1), "US_SSN"
            else:  # only where the tail's look refused it (once for each value)
                d, at = m.group(2), m.start(2)
                if at and _glued(text[at - 1]) and _ssn_valid(d[:3], d[4:6], d[7:]):
                    yield at, m.end(2), "US_SSN"


# --------------------------------------------------------------------------- IP

# Found from its dots (a literal first: a fast scan), then checked backwards.
_IPV4_TAIL = re.compile(r"\.\d{1,3}\.\d{1,3}\.\d{1,3}(?![\w]|\.\d)")
_IPV4_HEAD = re.compile(r"\d{1,3}\Z")
# Every IPv6 address has "::" or three groups in a row (":x:x:"); a time of day
# ("10:15:00") has neither, so timestamps cost no window check.
_IPV6_HINT = re.compile(r"::|:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}:")
_IPV6 = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{1,4}:|:)(?::|[0-9A-Fa-f]{1,4}:){1,7}"
    r"(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?(?:%[\w.]+)?(?![\w:]|\.\d)"
)


class IPDetector:
    """IPv4 (dotted quads) and IPv6 (full, compressed, with an embedded IPv4)."""

    entities = ("IP_ADDRESS",)
    line_local = True
    local_context = True

    def find(self, text: str) -> Iterator[Span]:
        for m in _IPV4_TAIL.finditer(text):
            head = _IPV4_HEAD.search(text, max(0, m.start() - 3), m.start())
            if head is None:
                continue
            start = head.start()
            if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_."):
                continue
            try:
                ipaddress.IPv4Address(text[start : m.end()])
            except ValueError:
                continue
            yield start, m.end(), "IP_ADDRESS"
        # IPv6: from each colon group (a literal ":" first: a fast scan), the full
        # pattern runs on a window around it.
        last = 0
        for hint in _IPV6_HINT.finditer(text):
            if hint.start() < last:
                continue
            lo, hi = max(last, hint.start() - 40), min(len(text), hint.end() + 41)
            for m in _IPV6.finditer(text, lo, hi):
                if m.end() <= hint.start():
                    continue
                if m.start() > hint.start():
                    break
                raw = m.group()
                if sum(c not in ":." for c in raw.split("%")[0]) < 3:
                    break  # "a::b", "::" are more often code than addresses
                try:
                    ipaddress.IPv6Address(raw)
                except ValueError:
                    break
                last = m.end()
                yield m.start(), m.end(), "IP_ADDRESS"
                break


# --------------------------------------------------------------------------- custom


class RegexDetector:
    """A custom recognizer from config: a pattern, optionally only after context words."""

    def __init__(
        self,
        entity: str,
        pattern: str,
        *,
        ignore_case: bool = False,
        context: Sequence[str] = (),
        window: int = 32,
    ) -> None:
        self.entity = entity
        self.entities = (entity,)
        self.pattern = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        self.window = window
        self.local_context = not context
        self._context = (
            re.compile("|".join(re.escape(w) for w in context), re.IGNORECASE) if context else None
        )

    def find(self, text: str) -> Iterator[Span]:
        for m in self.pattern.finditer(text):
            if m.end() == m.start():
                continue
            if self._context is not None:
                before = text[max(0, m.start() - self.window) : m.start()]
                if not self._context.search(before):
                    continue
            yield m.start(), m.end(), self.entity


class DenyList:
    """Literal values that are always personal data (customer names, project code names)."""

    def __init__(self, entity: str, values: Iterable[str], *, ignore_case: bool = True) -> None:
        self.entity = entity
        self.entities = (entity,)
        words = sorted({v for v in values if v.strip()}, key=len, reverse=True)
        self.line_local = not any("\n" in w or "\r" in w for w in words)
        self.local_context = True
        self.pattern = (
            re.compile(
                r"(?<!\w)(?:" + "|".join(re.escape(w) for w in words) + r")(?!\w)",
                re.IGNORECASE if ignore_case else 0,
            )
            if words
            else None
        )

    def find(self, text: str) -> Iterator[Span]:
        if self.pattern is None:
            return
        for m in self.pattern.finditer(text):
            yield m.start(), m.end(), self.entity


def builtin_detectors(
    entities: Iterable[str] = BUILTIN_ENTITIES, *, phone_regions: Sequence[str] = ("US",)
) -> list[Detector]:
    """The built-in detectors for ``entities`` (names from ``BUILTIN_ENTITIES``)."""
    wanted = set(entities)
    out: list[Detector] = []
    if "EMAIL" in wanted:
        out.append(EmailDetector())
    if "CREDIT_CARD" in wanted:
        out.append(CardDetector())
    if "US_SSN" in wanted:
        out.append(SSNDetector())
    if "IBAN" in wanted:
        out.append(IBANDetector())
    if "IP_ADDRESS" in wanted:
        out.append(IPDetector())
    if "PHONE" in wanted:
        out.append(PhoneDetector(phone_regions))
    return out
