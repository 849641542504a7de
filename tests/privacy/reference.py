"""The detectors' plain paths, frozen here to check the fast ones against (tests only).

Each fast path in ``codemode.privacy`` (a byte mask, a literal seed, a skipped check)
must find exactly what the plain code finds. ``reference_paths()`` swaps the plain code
in for the duration of a ``with`` block, so a test scans the same text both ways and
compares. When a new fast path replaces a function, its previous body goes here.
"""

from __future__ import annotations

import base64
import binascii
import random
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from codemode.literals import Anchors
from codemode.privacy import detectors, encoded, iban, known, phone, pool, splice
from codemode.privacy.encoded import (
    _RUN_TABLE,
    MIN_RUN,
    WRAPPED,
    _newline,
    _run_end,
)
from codemode.privacy.words import CARD_WORDS

__all__ = ["PHONE_PIECES", "decode_run", "random_rows", "reference_paths", "text_of_bytes"]

_RUN = b"a" * MIN_RUN


def searchable(value: str) -> bool:
    """``codemode.privacy.known``'s rule for a held value looked for again, one value at a
    time (before ``_unsearchable`` checked a batch in C passes)."""
    least = known.MIN_DIGITS if value.isdigit() else known.MIN_WHOLE
    return (
        len(value) >= least
        and not (value.isalpha() and value.islower())
        and known._SEP not in value
    )


def _runs(text: str) -> Iterator[tuple[int, int, str]]:
    """``codemode.privacy.encoded._runs`` before its one-line fast path."""
    marks = text.encode("ascii", "replace").translate(_RUN_TABLE)
    n = len(marks)
    pos = marks.find(_RUN)
    while pos != -1:
        line, end = pos, _run_end(marks, pos + MIN_RUN)
        width = end - pos
        nxt = end + _newline(text, end)
        if nxt > end and nxt < n and marks[nxt] == 0x61:
            after = _run_end(marks, nxt)
            if after - nxt > width and after - nxt >= WRAPPED and (after - nxt) % 4 == 0:
                alone = _plain_decode_run(text[pos:end])
                if alone is not None:
                    yield pos, end, alone
                pos, line, end, width = nxt, nxt, after, after - nxt
        while width >= WRAPPED and width % 4 == 0 and end - line == width:
            nl = _newline(text, end)
            nxt = end + nl
            if not nl or nxt >= n or marks[nxt] != 0x61:
                break
            line, end = nxt, _run_end(marks, nxt)
        for _ in range(2):
            if end < n and text[end] == "=":
                end += 1
        run = text[pos:end]
        decoded = _plain_decode_run("".join(run.split()) if line != pos else run)
        if decoded is not None:
            yield pos, end, decoded
        pos = marks.find(_RUN, end)


def _plain_decode_run(run: str) -> str | None:
    """``codemode.privacy.encoded._decode_run`` before hex runs were refused from their
    first byte."""
    if run.isdigit():
        if len(run) % 2 or run[::2].strip("23"):
            return None
        return encoded._text(bytes.fromhex(run))
    if len(run) % 2 == 0 and encoded._is_hex(run):
        got = encoded._text(bytes.fromhex(run))
        if got is not None:
            return got
    if len(run) <= 64 and run.upper() == run:
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
    return encoded._text(data)


decode_run = _plain_decode_run


def _plain_text(data: bytes) -> str | None:
    """``codemode.privacy.encoded._text`` before it told invalid UTF-8 without raising."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text:
        return None
    if text.isprintable():
        return text
    control = len(text) - len(text.translate(encoded._CONTROL))
    return text if control <= (1 - encoded.PRINTABLE) * len(text) else None


text_of_bytes = _plain_text


def _iban_matches(text: str) -> list[re.Match[str]]:
    """``codemode.privacy.iban._iban_matches`` before its literal seed."""
    return list(iban._IBAN.finditer(text))


def _phone_matches(text: str) -> Iterator[re.Match[str]]:
    """``codemode.privacy.phone._phone_matches`` before its byte mask of the starts."""
    return phone._PHONE.finditer(text)


def _mod97_ok(compact: str) -> bool:
    """``codemode.privacy.iban._mod97_ok`` before its path for numeric BBANs."""
    moved = (compact[4:] + compact[:4]).translate(iban._IBAN_DIGITS)
    return moved.isdigit() and moved.isascii() and int(moved) % 97 == 1


def _iban_find(self: iban.IBANDetector, text: str) -> Iterator[tuple[int, int, str]]:
    """``IBANDetector.find`` before compact candidates skipped the cuts."""
    for m in iban._iban_matches(text):
        raw = m.group()
        cuts = [len(raw)]
        if " " in raw:
            cuts += [i for i in range(len(raw) - 1, 14, -1) if raw[i] == " "]
        for cut in cuts:
            if self._valid(raw[:cut].replace(" ", "")):
                yield m.start(), m.start() + cut, "IBAN"
                break


def _phone_find(self: phone.PhoneDetector, text: str) -> Iterator[tuple[int, int, str]]:
    """``PhoneDetector.find`` before long runs of digits were refused without a check."""
    for m in phone._phone_matches(text):
        num = m.group(1)
        if len(num) >= 7 and self.is_phone(text, m.start(), num):
            yield m.start(), m.end(), "PHONE"
    yield from self.glued(text)  # (no fast path of its own)


_DIGIT_START = re.compile(rb"nd(?=[dnbr]{5})")
"""``codemode.privacy.phone._DIGIT_START`` before it skipped dates."""


def _luhn_ok(digits: str) -> bool:
    """``codemode.privacy.detectors._luhn_ok`` before it summed bytes."""
    total = sum(map(int, digits[-1::-2])) + sum(
        detectors._LUHN_DOUBLE[int(c)] for c in digits[-2::-2]
    )
    return total % 10 == 0


@contextmanager
def reference_paths() -> Iterator[None]:
    """Within the block, the detectors run their plain code instead of the fast paths."""
    saved = (encoded._runs, iban._iban_matches, splice.locate, phone._neg_context)
    saved_phone_matches, saved_luhn = phone._phone_matches, detectors._luhn_ok
    phone._phone_matches, detectors._luhn_ok = _phone_matches, _luhn_ok
    saved_text = encoded._text
    encoded._text = _plain_text
    saved_is_phone = phone.PhoneDetector.is_phone
    saved_more = (
        iban._mod97_ok,
        detectors._card_brand_ok,
        iban.IBANDetector.find,
        phone.PhoneDetector.find,
        phone._DIGIT_START,
    )
    iban._mod97_ok, detectors._card_brand_ok = _mod97_ok, detectors._brand_ok
    iban.IBANDetector.find = _iban_find  # type: ignore[method-assign]
    phone.PhoneDetector.find = _phone_find  # type: ignore[method-assign]
    phone._DIGIT_START = _DIGIT_START
    saved_card = detectors.CardDetector._find
    saved_card_find = detectors.CardDetector.find
    detectors.CardDetector._find = _card_find  # type: ignore[method-assign]
    detectors.CardDetector.find = _card_whole_find  # type: ignore[method-assign]
    encoded._runs = _runs
    iban._iban_matches = _iban_matches
    splice.locate = _locate
    phone._neg_context = _neg_context
    phone.PhoneDetector.is_phone = _is_phone  # type: ignore[method-assign]
    Anchors.enabled = False  # every anchor looked up with ``in`` (no RE2 pass)
    pool.ENABLED = False  # the plain code runs here, none of it in a scanner process
    try:
        yield
    finally:
        pool.ENABLED = True
        Anchors.enabled = True
        encoded._runs, iban._iban_matches, splice.locate, phone._neg_context = saved
        phone._phone_matches, detectors._luhn_ok = saved_phone_matches, saved_luhn
        encoded._text = saved_text
        phone.PhoneDetector.is_phone = saved_is_phone  # type: ignore[method-assign]
        iban._mod97_ok, detectors._card_brand_ok = saved_more[:2]
        iban.IBANDetector.find = saved_more[2]  # type: ignore[method-assign]
        phone.PhoneDetector.find = saved_more[3]  # type: ignore[method-assign]
        phone._DIGIT_START = saved_more[4]
        detectors.CardDetector._find = saved_card  # type: ignore[method-assign]
        detectors.CardDetector.find = saved_card_find  # type: ignore[method-assign]


def _card_whole_find(self: detectors.CardDetector, text: str) -> Iterator[tuple[int, int, str]]:
    """``CardDetector.find`` before its byte mask: the pattern over the whole text; and
    the cards glued to a card word (``card4111...``), before any card they overlap."""
    glued = []
    for w in _ASCII_WORD_THEN_DIGIT.finditer(text):
        if w.group().lower() in CARD_WORDS:
            m = detectors._CARD_AT.match(text, w.end())
            if m is not None and detectors._card_ok(m.group()):
                glued.append((m.start(), m.end(), "CREDIT_CARD"))
    plain = [
        f
        for f in self._find(text, 0, len(text))
        if not any(f[0] < e and s < f[1] for s, e, _ in glued)
    ]
    yield from sorted(glued + plain)


# A whole word of ASCII letters (after no letter or digit of any script) right before a digit.
_ASCII_WORD_THEN_DIGIT = re.compile(r"(?<![^\W_])[A-Za-z]+(?=\d)")


def _card_find(
    self: detectors.CardDetector, text: str, start: int, end: int
) -> Iterator[tuple[int, int, str]]:
    """``CardDetector._find`` before it searched instead of making a finditer."""
    for m in detectors._CARD.finditer(text, start, end):
        raw = m.group()
        sep = " " if " " in raw else "-" if "-" in raw else ""
        if sep and ("-" if sep == " " else " ") in raw:
            continue
        digits = raw.replace(sep, "") if sep else raw
        if not 12 <= len(digits) <= 19 or (not sep and len(digits) > 16):
            continue
        if sep and tuple(len(g) for g in raw.split(sep)) not in detectors._CARD_GROUPS:
            continue
        if detectors._card_brand_ok(digits) and detectors._luhn_ok(digits):
            yield m.start(), m.end(), "CREDIT_CARD"


def _neg_context(before: str) -> bool:
    """``codemode.privacy.phone._neg_context`` before its check of the last character."""
    tail = before
    while True:
        cut = tail.rstrip().rstrip(phone._NEG_SEPARATORS)
        if cut == tail:
            break
        tail = cut
    if not tail:
        return "#" in before
    last = tail[-1]
    if last.isascii() and last.lower() not in phone._NEG_LAST and "#" not in before[len(tail) :]:
        return False
    return phone._NEG_CONTEXT.search(before) is not None


def _is_phone(self: phone.PhoneDetector, text: str, start: int, num: str) -> bool:
    """``PhoneDetector.is_phone`` before it took separators out of ASCII numbers as bytes."""
    if num[:2] in ("+ ", "+.", "+-"):
        return False
    digits = num.replace("(0)", "", 1).translate(phone._PHONE_SEPARATORS)
    if not 7 <= len(digits) <= 15 or phone._not_phone(num):
        return False
    before = text[max(0, start - 24) : start]
    if phone._neg_context(before):
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
    context = self._context.search(before) is not None
    if not context and (len(digits) < 8 or not phone._phone_grouping(num)):
        return False
    n = len(digits)
    for prefix, lengths in self._national:
        if n in lengths:
            return True
        if prefix and digits.startswith(prefix) and n - len(prefix) in lengths:
            return True
    return False


def _locate(
    pieces: list[str],
    joined: str,
    ss: list[int],
    ts: list[int],
    origin: tuple[int, int] | None = None,
    values: list[str] | None = None,
) -> tuple[list[int], list[int]] | None:
    """``codemode.privacy.splice.locate`` before it counted NULs: from every offset
    (``origin`` and ``values`` are not needed)."""
    return splice._locate_by_offsets(pieces, ss, ts)


# --------------------------------------------------------------------------- random rows

_PIECES = [
    "alice.o'neil+crm@mail.example.co.uk", "bob@example.com", "x@y", "a@b.c",
    "+1 415-555-0132", "+44 20 7946 0958", "(415) 555-0132", "415.555.0132x204",
    "Tel.: 4155550132", "0151 23456789", "4155550132", "00 49 30 1234567", "+1 (0) 555 1234",
    "4111 1111 1111 1111", "4111-1111-1111-1111", "4111111111111111", "4111111111111112",
    "3782-822463-10005", "5500 0000 0000 0004", "DE89 3704 0044 0532 0130 00",
    "DE89370400440532013000", "GB82WEST12345698765432", "GB82 WEST 1234 5698 7654 32",
    "FR1420041010050500013M02606", "DE00370400440532013000", "AB12 CD34 EF56 GH78",
    "XX99", "IBAN DE89 3704 0044 0532 0130 00 ABCD", "123-45-6789", "SSN: 123456789",
    "666-12-3456", "203.0.113.7", "10.0.0.1:8080", "2001:db8::8a2e:370:7334", "::1",
    "2025-01-31", "2025-01-31T10:15:00Z", "31/01/2025", "v10.4.12", "1,234,567.89",
    "ORD-000123-4", "SKU 123-456-7890", "978-3-16-148410-0",
    "123e4567-e89b-12d3-a456-426614174000", "YWxpY2VAZXhhbXBsZS5jb20=",
    "YWxpY2VAZXhhbXBsZS5jb20", "616c69636540657861 6d706c652e636f6d",
    "616c696365406578616d706c652e636f6d", "alice%40example.com", "\\u0061lice@example.com",
    "ａｌｉｃｅ＠ｅｘａｍｐｌｅ．ｃｏｍ",
    "\u0664\u0661\u0665 \u0665\u0665\u0665 \u0660\u0661\u0663\u0662",
    "Chloé García", "東京都 電話 03-1234-5678", "Straße 5", "\u00a0", "\n", "\r\n", "\t",
    " ", ", ", "#", "x", "ext. 12", "@", "/", "-", "+", "(", ")", ".", ":", "=", "==",
    "[EMAIL_abcdefghij]",
]  # fmt: skip
# Credential shapes such as ``token=<value>`` may run on across the NUL that joins two
# texts (the engine's slow path): only in the rows that ask for them.
_SECRETS = ["Bearer abcdefghijklmnop1234", "token=abc123def456"]
PHONE_PIECES = [
    *"0123456789 ().-/+#xe\u00a0\t\na\u00e9@:_,\x00", "ext", "ext.", "extension", "phone ",
    "Tel: ", "tel.", "Handy", "00", "+1 ", "555-", "2025-01-31", "\u0663", "\u00f6", "415", "0132",
    "(415) ", "+44 20 ", "7946 0958", " x12", "#3", "order ", "id=", "SKU ", "# ", "v", "no. ",
    "(0)", "+49 (0)30 ", "1.234", "12/31", " - ", "Nr.",
]  # fmt: skip
"""What phone numbers and their look-alikes are made of, for random texts."""
_KEYS = ["email", "phone", "tel", "card", "iban", "notes", "id", "order", "ssn", "ip", "x"]


def _text(rng: random.Random, pieces: list[str]) -> str:
    return "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 6))).join(
        ("", "") if rng.random() < 0.7 else ("note ", " end")
    )


def random_rows(seed: int, n: int = 200, *, secrets: bool = False) -> list[dict[str, Any]]:
    """Rows of random fields made of PII, look-alikes and the characters around them."""
    rng = random.Random(seed)
    pieces = _PIECES + _SECRETS if secrets else _PIECES
    rows: list[dict[str, Any]] = []
    for _ in range(n):
        row: dict[str, Any] = {}
        for _ in range(rng.randrange(1, 7)):
            key = rng.choice(_KEYS)
            kind = rng.random()
            if kind < 0.7:
                row[key] = _text(rng, pieces)
            elif kind < 0.8:
                row[key] = [_text(rng, pieces) for _ in range(rng.randrange(1, 4))]
            elif kind < 0.9:
                row[key] = rng.choice([None, True, 1.5, 42, 4111111111111111])
            else:
                row[key] = {"value": _text(rng, pieces)}
        rows.append(row)
    return rows
