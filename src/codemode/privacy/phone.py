"""Phone numbers: a candidate's shape, then the numbering plans of ``phonenumbers``.

Split from ``codemode.privacy.detectors`` (which re-exports ``PhoneDetector``): the
detector with the most checks per candidate, and the one most scans spend time in.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

from .onebyte import one_byte
from .words import PHONE_WORDS, word_before

__all__ = ["PHONE_CONTEXT", "PhoneDetector"]

Span = tuple[int, int, str]

PHONE_CONTEXT = (
    "phone", "tel", "telephone", "mobile", "cell", "call", "fax", "ring", "whatsapp",
    "contact", "number", "telefon", "telefono", "teléfono", "téléphone", "telefone",
    "telefoon", "handy", "mobil", "mobiel", "móvil", "portable", "cellulare", "celular",
    "fone", "bel", "llamar", "tél", "電話", "携帯", "tel.", "tlf",
)  # fmt: skip

_PHONE = re.compile(
    r"""(?P<num>[+(\d](?<![\w@/.:+#-][+(\d])   # a start not glued to a word, path or number
    (?!\d{3}[-./]\d{1,2}[-./]\d)             # not a date (2025-01-31): no Python check each
    [\d ()./\-\u00a0]{4,25}\d)
    (?P<ext>\s?(?:x|ext\.?|extension|\#)\s?\d{1,6})?
    (?![\w@/:-]|\.\d)""",
    re.X,
)
# A number glued to a phone word ("tel+14155550123", "phone(415) 555-0123"): the
# pattern from its "+" or "(", without the look at what precedes it.
_PHONE_GLUED = re.compile(_PHONE.pattern.replace(r"(?<![\w@/.:+#-][+(\d])", "", 1), re.X)
# What a phone-shaped candidate is not: a date anywhere in it, "--" or "//", or as a
# whole one of the shapes below. Three checks instead of one alternation searched at
# every position: the dates' regex runs only when two separators enclose 1-2 digits.
_DATE_SEPARATORS = re.compile(r"[-./]\d{1,2}[-./]")
_DATES = re.compile(
    r"""\d{4}[-./]\d{1,2}[-./]\d{1,2}          # ISO first
    |\d{1,2}[-./]\d{1,2}[-./](?:19|20)\d{2}   # day or month first
    """,
    re.X,
)
_NOT_PHONE_WHOLE = re.compile(
    r"""\d{1,3}(?:\.\d{1,3}){1,3}              # IPv4, versions
    |\d{3}-\d{2}-\d{4}                       # SSN shape
    |\d{1,3}(?:[.,]\d{3})+(?:[.,]\d{1,2})?   # amounts with thousands
    |-?\d+[.,]\d+                            # decimals, coordinates
    |\d{1,5}(?:-\d{1,7}){2,3}-[\dX]          # ISBN-10/13 with hyphens
    """,
    re.X,
)


def _not_phone(num: str) -> bool:
    if "--" in num or "//" in num:
        return True
    if _DATE_SEPARATORS.search(num) is not None and _DATES.search(num) is not None:
        return True
    # Every shape of _NOT_PHONE_WHOLE starts with a digit: "+..." and "(..." are not one.
    return num[0].isdigit() and _NOT_PHONE_WHOLE.fullmatch(num) is not None


_NEG_CONTEXT = re.compile(
    r"(?i)(?:(?<!\w)(?:sku|isbn|order|invoice|ref|po|version|v|id|no|nr)|#)[\s:.#=-]*$"
)
_NEG_SEPARATORS = ":.#=-"
_NEG_LAST = frozenset("unrefodv")  # the last letters of _NEG_CONTEXT's words


def _neg_context(before: str) -> bool:
    """``_NEG_CONTEXT.search(before)``, without the search when no word of it can end
    right before the trailing separators (most texts: a regex try at each position)."""
    last = before[-1:]
    if (
        last
        and last.isascii()
        and not last.isspace()
        and last not in _NEG_SEPARATORS
        and last.lower() not in _NEG_LAST
    ):
        return False  # the common case (a NUL or a letter before the number), at once
    tail = before
    while True:
        cut = tail.rstrip().rstrip(_NEG_SEPARATORS)
        if cut == tail:
            break
        tail = cut
    if not tail:
        return "#" in before
    last = tail[-1]
    if last.isascii() and last.lower() not in _NEG_LAST and "#" not in before[len(tail) :]:
        return False
    return _NEG_CONTEXT.search(before) is not None


# Where a match of _PHONE may start, found in a byte mask of the text instead of by a try
# of the pattern at each of its digits (a CRM export: ~175,000 a MB, one in thirty the
# start of a match). One byte per character: ASCII digits -> "d"; "." "/" "-" -> "b" and
# letters, "_", "@", ":", "#" -> "w" (they glue a number to what precedes it, as the
# pattern's look-behind says); "(", "?" (in ``one_byte``'s ASCII form, any character
# beyond Latin-1: it may be another script's digit or a letter) and the no-break space
# -> "r" (rare: looked at around each); "+" -> "p"; space, ")" and the other white space
# -> "n"; the rest (NUL, quotes, commas, ...: neither part of a number nor white space)
# -> "q". A Latin-1 text's own bytes are read as its characters: a letter ("é", "ß")
# glues as an ASCII one does ("w"; Latin-1 holds no digit ``\d`` matches beyond ASCII),
# so names in Western scripts cost no look around them. A match's first
# character and the five after it are all of ``[+(\d]`` or ``[\d ()./\-\u00a0]``, so it
# starts
# - at a digit after an "n" or a "q", with five of "dnbr" next (a literal "nd" or "qd"
#   first: a fast scan),
# - or at an "r", or right after one, with five of "dnbr" after the "r" (a superset),
# - or at a "p" with five of "dnbr" next (never right after one: "+" glues a number).
# The pattern is tried at those places only, in order, each past the last match's end:
# what ``_PHONE.finditer`` finds, as a try anywhere else fails at its first character or
# its look-behind. Not tried either (``_LONG``): a run of 16 or more ASCII digits that a
# "q", a "+" or the end of the text follows. Its match would be the run alone (none of
# those continues the number, nor starts an extension, which begins with white space,
# "x", "e" or "#"), which ``PhoneDetector.find`` refuses (a card, an id); no other start
# lies inside it (each digit is glued to the one before), so the matches after it are
# the same.
_START_MASK = bytes(
    0x64 if 0x30 <= c <= 0x39
    else 0x72 if c in b"(?\xa0"
    else 0x70 if c == 0x2B
    else 0x62 if c in b"./-"
    else 0x77 if chr(c).isalnum() or c in b"_@:#"
    else 0x6E if c in b" )" or chr(c).isspace()
    else 0x71
    for c in range(256)
)  # fmt: skip
# (Not where the pattern's date look-ahead fails on ASCII: "2025-01-31" is no start.)
_LONG = rb"(?!d{15,}(?:[qp]|\Z))"
_DIGIT_START = re.compile(rb"nd(?!dddbdd?bd)" + _LONG + rb"(?=[dnbr]{5})")
_QUOTED_START = re.compile(rb"qd(?!dddbdd?bd)" + _LONG + rb"(?=[dnbr]{5})")
_RARE_START = re.compile(rb"r(?=[dnbr]{5})")
_PLUS_START = re.compile(rb"p(?=[dnbr]{5})")


def _phone_starts(text: str) -> list[int]:
    """Where a match of ``_PHONE`` that ``PhoneDetector.find`` may keep starts in
    ``text`` (a superset), in order."""
    # A leading "n" stands for the start of the text (nothing glued before it): offsets in
    # the mask are then one past those in the text.
    mask = b"n" + one_byte(text).translate(_START_MASK)
    starts = [m.start() for m in _DIGIT_START.finditer(mask)]
    starts += [m.start() for m in _QUOTED_START.finditer(mask)]
    if b"r" in mask:
        for m in _RARE_START.finditer(mask):
            r = m.start()
            starts += (r - 1, r)
    if b"p" in mask:
        starts += [m.start() - 1 for m in _PLUS_START.finditer(mask)]
    starts.sort()
    return starts


MASK_MIN = 256
"""Texts this long are searched from the mask's starts; a shorter one costs less to
search with the pattern alone than to translate."""


def _phone_matches(text: str) -> Iterable[re.Match[str]]:
    """``_PHONE.finditer(text)`` (from 256 characters on, but for matches that
    ``PhoneDetector.find`` would refuse: ``_masked_matches``)."""
    return _masked_matches(text) if len(text) >= MASK_MIN else _PHONE.finditer(text)


def _masked_matches(text: str) -> list[re.Match[str]]:
    """``list(_PHONE.finditer(text))``, the pattern tried only where ``_phone_starts``
    says (a list: no generator step per match), but for the matches of long runs of
    digits that ``PhoneDetector.find`` would refuse."""
    match = _PHONE.match
    last = 0
    found = []
    for start in _phone_starts(text):
        if start >= last and (m := match(text, start)) is not None:
            last = m.end()
            found.append(m)
    return found


_PHONE_SEPARATORS = dict.fromkeys(map(ord, "+ ()./-\u00a0"))
_ASCII_SEPARATORS = b"+ ()./-"
_SEPARATED = re.compile(r"\d[\s()./\-\u00a0]+\d")
_NON_DIGIT = re.compile(r"\D+")


class PhoneDetector:
    """International and national phone numbers, by shape, then the numbering plans.

    A candidate needs evidence that it is a phone number and not an id: a leading ``+``
    or ``00``, separators between digit groups, or a context word just before it. Its
    length must then be possible for its country calling code (international) or for one
    of ``regions`` (national, with or without the trunk prefix), by ``phonenumbers``'
    metadata. Parsing every candidate with ``phonenumbers.parse`` would cost ~50 us each;
    the length tables give the same answer for "possible" in a dictionary look-up.
    """

    entities = ("PHONE",)
    line_local = True
    local_context = True

    def __init__(
        self, regions: Sequence[str] = ("US",), context: Iterable[str] = PHONE_CONTEXT
    ) -> None:
        self.regions = tuple(r.upper() for r in regions) or ("US",)
        self._international, self._national = _phone_plans(self.regions)
        words = sorted({w.lower() for w in context}, key=len, reverse=True)
        self._context = re.compile(
            r"(?i)(?:^|[^\w])(?:" + "|".join(re.escape(w) for w in words) + r")\W{0,4}$"
        )

    def find(self, text: str) -> Iterator[Span]:
        is_phone = self.is_phone
        for m in _phone_matches(text):
            num = m.group(1)
            n = len(num)
            # 7 to 15 digits: a run of more digits alone (a card, an id) is refused here
            if n >= 7 and not (n > 15 and num.isdigit()) and is_phone(text, m.start(), num):
                yield m.start(), m.end(), "PHONE"
        if "+" in text or "(" in text:
            yield from self.glued(text)

    def glued(self, text: str) -> Iterator[Span]:
        """Numbers that start with "+" or "(" right after a phone word (``PHONE_WORDS``),
        which the pattern's look-behind refuses: a letter glues a number to any other
        word (an id, a code). Looked for from each "+" and "(" (a memchr each)."""
        for sign in "+(":
            at = text.find(sign, 1)
            while at != -1:
                c = text[at - 1]
                if c.isascii() and c.isalpha() and word_before(text, at, PHONE_WORDS):
                    m = _PHONE_GLUED.match(text, at)
                    if m is not None and self.is_phone(text, at, m.group(1)):
                        yield at, m.end(), "PHONE"
                at = text.find(sign, at + 1)

    def is_phone(self, text: str, start: int, num: str) -> bool:
        if num[:2] in ("+ ", "+.", "+-"):
            return False
        # num: digits and the separators, which go (in bytes when ASCII: a third of the time)
        trunk = num.replace("(0)", "", 1) if "(" in num else num
        if trunk.isascii():
            digits = trunk.encode().translate(None, _ASCII_SEPARATORS).decode()
        else:
            digits = trunk.translate(_PHONE_SEPARATORS)
        if not 7 <= len(digits) <= 15 or _not_phone(num):
            return False
        # ``_neg_context``'s first look, without the slice and the call: a NUL, a quote or
        # a letter before the number (most JSON fields) ends no word of it.
        c = text[start - 1] if start else ""
        before = ""
        if not (
            c
            and c.isascii()
            and not c.isspace()
            and c not in _NEG_SEPARATORS
            and c.lower() not in _NEG_LAST
        ):
            before = text[max(0, start - 24) : start]
            if _neg_context(before):
                return False
        if num[0] == "+" or num.startswith("00"):
            d = digits[2:] if num[0] == "0" else digits
            for k in (1, 2, 3):
                lengths = self._international.get(d[:k])
                if lengths is not None:
                    if len(d) - k in lengths:
                        return True
                    break
            if num[0] == "+":
                return False
        if not before:
            before = text[max(0, start - 24) : start]
        context = self._context.search(before) is not None
        if not context and (len(digits) < 8 or not _phone_grouping(num)):
            return False  # a bare run of digits is an id unless a word says otherwise
        n = len(digits)
        for prefix, lengths in self._national:
            if n in lengths:
                return True
            if prefix and digits.startswith(prefix) and n - len(prefix) in lengths:
                return True
        return False


@functools.lru_cache(maxsize=16)
def _phone_plans(
    regions: tuple[str, ...],
) -> tuple[Mapping[str, frozenset[int]], tuple[tuple[str, frozenset[int]], ...]]:
    """Possible lengths by country calling code, and (trunk prefix, lengths) per region:
    read from ``phonenumbers``' metadata once per process and set of regions (4 ms, most
    of what building a scanner cost; each new engine builds one), shared read-only."""
    import phonenumbers
    from phonenumbers import PhoneMetadata

    international: dict[str, frozenset[int]] = {}
    for code, codes_regions in phonenumbers.COUNTRY_CODE_TO_REGION_CODE.items():
        lengths: set[int] = set()
        for region in codes_regions:
            meta = PhoneMetadata.metadata_for_region_or_calling_code(code, region)
            if meta is not None and meta.general_desc is not None:
                lengths.update(meta.general_desc.possible_length or ())
        if lengths:
            international[str(code)] = frozenset(lengths)
    national: list[tuple[str, frozenset[int]]] = []
    for region in regions:
        meta = PhoneMetadata.metadata_for_region(region)
        if meta is None or meta.general_desc is None:
            raise ValueError(f"unknown phone region {region!r} (use ISO codes such as US, GB)")
        national.append(
            (meta.national_prefix or "", frozenset(meta.general_desc.possible_length or ()))
        )
    return international, tuple(national)  # (a plain dict: a proxy's ``get`` costs more)


def _phone_grouping(num: str) -> bool:
    """Separated digit groups as phones are written: 2+ groups, none absurdly long."""
    if _SEPARATED.search(num) is None:
        return False
    groups = [g for g in _NON_DIGIT.split(num) if g]
    if len(groups) < 2 or max(len(g) for g in groups) > 8:
        return False
    return len(groups) > 2 or len(groups[-1]) >= 4  # "53184-320" is a postcode
