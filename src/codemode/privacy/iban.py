"""IBANs: the country's format and the mod-97 check (a detector of
``codemode.privacy.detectors``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from .onebyte import one_byte

Span = tuple[int, int, str]

_IBAN = re.compile(r"[A-Z](?<![\w][A-Z])[A-Z]\d\d(?: ?[A-Z0-9]){10,32}(?![\w])")


_IBAN_FORMATS: dict[str, Callable[[str], bool]] = {}
"""Each country's check, shared by every detector (a fresh scanner costs no look-ups)."""


class IBANDetector:
    """IBANs, compact or in groups of four: the country's format and the mod-97 check.

    The rules are ``python-stdnum``'s (its registry of national BBAN formats); the
    per-country format is looked up once per country and process, not per candidate.
    """

    entities = ("IBAN",)
    line_local = True
    local_context = True

    def __init__(self) -> None:
        from stdnum import iban

        self._iban = iban
        self._formats = _IBAN_FORMATS

    def _valid(self, compact: str) -> bool:
        if len(compact) < 15 or not _mod97_ok(compact):
            return False
        check = self._formats.get(compact[:2])
        if check is None:
            check = self._formats[compact[:2]] = _bban_check(self._iban, compact[:2])
        return check(compact)

    def find(self, text: str) -> Iterator[Span]:
        valid, formats = self._valid, self._formats
        for m in _iban_matches(text):
            raw = m.group()
            if " " not in raw:  # compact: one candidate, no cuts; ``_valid`` inline
                if len(raw) >= 15 and _mod97_ok(raw):
                    check = formats.get(raw[:2])
                    if check is None:
                        check = formats[raw[:2]] = _bban_check(self._iban, raw[:2])
                    if check(raw):
                        yield m.start(), m.end(), "IBAN"
                continue
            # A grouped IBAN may have swallowed a following word ("... 32 ABCD"): try
            # shorter cuts at group boundaries until one is valid.
            cuts = [len(raw)]
            cuts += [i for i in range(len(raw) - 1, 14, -1) if raw[i] == " "]
            for cut in cuts:
                if valid(raw[:cut].replace(" ", "")):
                    yield m.start(), m.start() + cut, "IBAN"
                    break


# Every IBAN starts with two capitals and two digits: those four are found in a byte mask
# (capitals -> "A"; digits, and every non-ASCII character, which may be another
# script's digit, -> "d") by a fast literal search, and the pattern is tried there only,
# not at every capital of the text.
_IBAN_MASK = bytes(
    0x41 if 0x41 <= c <= 0x5A else 0x64 if 0x30 <= c <= 0x39 or c == 0x3F or c > 0x7F else 0x2E
    for c in range(256)
)


_IBAN_SEED = re.compile(rb"AAdd")


# A compact IBAN (no space in it, nor a space and a character of one after it), matched
# by a plain repeat (the pattern's "(?: ?[A-Z0-9])" costs a group step per character):
# where it matches, ``_IBAN`` matches the same run (its greedy repeat takes the run and
# can go no further), and where it does not, ``_IBAN`` is tried.
_IBAN_COMPACT = re.compile(r"[A-Z](?<![\w][A-Z])[A-Z]\d\d[A-Z0-9]{10,32}(?![\w]| [A-Z0-9])")


def _iban_matches(text: str) -> list[re.Match[str]]:
    """``list(_IBAN.finditer(text))``: a match can only start where the mask reads "AAdd".

    Those places in one pass (``finditer``: every one, as "AAdd" cannot overlap itself),
    not a ``find`` call each (half the time on a table of IBANs)."""
    match, compact = _IBAN.match, _IBAN_COMPACT.match
    found = []
    end = 0
    for seed in _IBAN_SEED.finditer(one_byte(text).translate(_IBAN_MASK)):
        at = seed.start()
        if at >= end and (
            (m := compact(text, at)) is not None or (m := match(text, at)) is not None
        ):
            found.append(m)
            end = m.end()
    return found


_IBAN_DIGITS = {ord(c): str(i) for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ", 10)}
_LETTER_DIGITS = {chr(c): d for c, d in _IBAN_DIGITS.items()}


def _mod97_ok(compact: str) -> bool:
    rest = compact[2:]
    if rest.isdigit() and rest.isascii():
        # Letters only in the country code (most countries' IBANs): two look-ups instead
        # of a translate, which maps each character through a dict (0.6 us an IBAN).
        a, b = _LETTER_DIGITS.get(compact[0]), _LETTER_DIGITS.get(compact[1])
        if a is not None and b is not None:
            return int(rest[2:] + a + b + rest[:2]) % 97 == 1
    moved = (compact[4:] + compact[:4]).translate(_IBAN_DIGITS)  # A=10 ... Z=35
    return moved.isdigit() and moved.isascii() and int(moved) % 97 == 1


def _bban_check(iban: Any, country: str) -> Callable[[str], bool]:
    """stdnum's check of one country's IBANs, with the format looked up only once."""
    try:
        info = iban._ibandb.info(country)[0][1]
        bban = iban._struct_to_re(info["bban"]) if info else None
        module = iban._get_cc_module(country)
    except (AttributeError, KeyError, IndexError, TypeError):  # stdnum changed: slow path
        return lambda compact: bool(iban.is_valid(compact))
    if bban is None:
        return lambda compact: False
    if module is not None:
        return lambda compact: bool(bban.match(compact[4:])) and bool(iban.is_valid(compact))
    return lambda compact: bool(bban.match(compact[4:]))
