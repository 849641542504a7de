"""The detectors' fast paths find exactly what their plain code finds, and the scanner's
cache of large texts never returns what a scan would not."""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from codemode.privacy import detectors, encoded, iban, phone
from codemode.privacy.config import PrivacyConfig, Recognizer
from codemode.privacy.detectors import CardDetector
from codemode.privacy.engine import Privacy, build_scanner
from codemode.privacy.onebyte import one_byte
from codemode.privacy.phone import _PHONE, PhoneDetector, _masked_matches
from codemode.privacy.quality import load_corpus
from codemode.privacy.scan import CACHE_MIN, Scanner, Span
from codemode.privacy.splice import SEP, locate
from codemode.privacy.vault import Vault
from codemode.privacy.walk import Leaves
from codemode.redact import forget_secrets, remember_secret

from .reference import (
    PHONE_PIECES,
    decode_run,
    random_rows,
    reference_paths,
    text_of_bytes,
)

CORPUS = Path(__file__).parent / "corpus" / "corpus.jsonl"
CONFIG = PrivacyConfig(enabled=True, phone_regions=["US", "GB", "DE", "FR"])


@pytest.fixture(autouse=True)
def _no_remembered_secrets() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


def both_ways(texts: list[str]) -> tuple[list[list[Span]], list[list[Span]]]:
    fast = build_scanner(CONFIG)
    got = [fast.spans(t) for t in texts]
    with reference_paths():
        plain = build_scanner(CONFIG)
        want = [plain.spans(t) for t in texts]
    return got, want


def joined(value: object) -> str:
    return SEP.join(Leaves.collect(value).texts)


def test_fast_paths_find_what_the_plain_code_finds_on_the_frozen_corpus() -> None:
    texts = [row["text"] for row in load_corpus(CORPUS)]
    got, want = both_ways(texts)
    assert sum(map(len, want)) > 3000  # the corpus is full of values
    assert got == want


@pytest.mark.parametrize("seed", range(8))
def test_fast_paths_find_what_the_plain_code_finds_in_random_json(seed: int) -> None:
    rows = random_rows(seed, secrets=seed % 2 == 1)
    texts = [json.dumps(r, ensure_ascii=False) for r in rows] + [json.dumps(r) for r in rows]
    texts += [joined(r) for r in rows] + [joined(rows)]
    got, want = both_ways(texts)
    assert sum(map(len, want)) > 100
    assert got == want


def test_the_phone_detector_finds_what_its_plain_code_finds_in_random_texts() -> None:
    rng = random.Random(14)
    texts = [
        "".join(rng.choice(PHONE_PIECES) for _ in range(rng.randrange(1, 30)))
        for _ in range(20_000)
    ]
    det = PhoneDetector(("US", "GB", "DE", "FR"))
    got = [list(det.find(t)) for t in texts]
    with reference_paths():
        want = [list(det.find(t)) for t in texts]
    assert sum(map(bool, want)) > 1000
    assert got == want


def test_long_runs_of_digits_after_a_context_word_are_judged_as_the_plain_code_does() -> None:
    """Runs of 12 to 20 digits (ids, cards, phones of 15 digits) are refused before the
    full check only where it would refuse them too."""
    rng = random.Random(19)
    texts = [
        f"{rng.choice(['Tel: ', 'phone ', '+', '00', 'id '])}{rng.randrange(10**n):0{n}d}"
        f"{rng.choice(['', ' x12', '.', '-1', ' end'])}"
        for n in range(12, 21)
        for _ in range(300)
    ]
    det = PhoneDetector(("US", "GB", "DE", "FR", "AT", "JP"))
    got = [list(det.find(t)) for t in texts]
    with reference_paths():
        want = [list(det.find(t)) for t in texts]
    assert sum(map(bool, want)) > 300
    assert got == want


def test_phone_matches_are_tried_where_the_pattern_alone_would_find_them() -> None:
    """The starts read from the byte mask miss no match of the pattern: digits of other
    scripts, no-break spaces, letters and punctuation of any script around numbers."""
    rng = random.Random(16)
    common = "0123456789 ()+-./#:@_?ax\u00a0\t\n\x00"
    texts = [
        "".join(
            rng.choice(common) if rng.random() < 0.8 else chr(rng.randrange(0x3100))
            for _ in range(rng.randrange(1, 40))
        )
        for _ in range(20_000)
    ]
    texts += [
        "".join(rng.choice(PHONE_PIECES) for _ in range(rng.randrange(1, 30)))
        for _ in range(20_000)
    ]
    # Runs of 16+ ASCII digits followed by what does not continue a number (or starts an
    # extension): "quoted", at the end, before a "+", a letter, white space, a separator.
    texts += [
        "".join(rng.choice(["", " ", "\x00", "+", "(", "tel "]) for _ in range(2))
        + "".join(rng.choice("0123456789") for _ in range(rng.randrange(14, 30)))
        + "".join(rng.choice(common) for _ in range(rng.randrange(0, 8)))
        for _ in range(20_000)
    ]
    got = [[m.span() for m in _masked_matches(t) if not _long_run(m.group(1))] for t in texts]
    want = [[m.span() for m in _PHONE.finditer(t) if not _long_run(m.group(1))] for t in texts]
    assert sum(map(bool, want)) > 5000
    assert got == want
    # What the starts may leave out are matches of long runs alone, which the detector
    # refuses (and which end where no other start lies).
    left_out = [m for t in texts for m in _PHONE.finditer(t) if _long_run(m.group(1))]
    assert len(left_out) > 1000
    det = PhoneDetector()
    assert not any(list(det.find(m.group())) for m in left_out)


def _long_run(num: str) -> bool:
    return len(num) >= 16 and num.isascii() and num.isdigit()


CARD_PIECES = [
    "4111111111111111", "4000000000000010", "378282246310005", "5555555555554444",
    "601111111111111", "4111 1111 1111 1111", "4111-1111", "0000", "1234", "9", "0",
    *" -./_a+\x00\u00e9\u0663?,", "x", "ID", "card ", "card", "Visa", "cc", "SKU",
    "4111111111111111111",
    "3782 822463 10005", "3714-496353-9843", "822463", "10005", "12", "SKU-1234-5678",
]  # fmt: skip


@pytest.mark.parametrize("latin1", [False, True], ids=["any", "latin1"])
def test_the_card_detector_finds_what_its_plain_code_finds_in_random_texts(latin1: bool) -> None:
    """Bare runs of digits are checked without the pattern: the same cards, with any
    character before or after them (a letter, "./" and a digit, another script's); in
    Latin-1 text with no "?" (seeds only where a run of digits starts), long runs too."""
    rng = random.Random(15)
    pieces = CARD_PIECES
    if latin1:
        pieces = [p for p in CARD_PIECES if "?" not in p and all(ord(c) < 256 for c in p)]
        pieces += ["41111111111111111111", "DE89370400440532013000", "1234 5678 9012 3456"]
    texts = [
        "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 12))) for _ in range(20_000)
    ]
    det = CardDetector()
    got = [list(det.find(t)) for t in texts]
    with reference_paths():
        want = [list(det.find(t)) for t in texts]
    assert sum(map(bool, want)) > 1000
    assert got == want


def test_the_luhn_check_on_bytes_agrees_with_the_digit_by_digit_sum() -> None:
    rng = random.Random(17)
    runs = [
        "".join(
            rng.choice("0123456789" if rng.random() < 0.97 else "\u0663\u06f5") for _ in range(n)
        )
        for n in (rng.randrange(1, 25) for _ in range(50_000))
    ]
    got = list(map(detectors._luhn_ok, runs))
    with reference_paths():
        want = list(map(detectors._luhn_ok, runs))
    assert 3000 < sum(want) < 47_000
    assert got == want


def test_the_iban_and_card_checks_agree_with_their_plain_code() -> None:
    """The mod-97 path for numeric BBANs and the table of card prefixes' lengths."""
    rng = random.Random(18)
    alphabet = "0123456789" * 6 + "ABDEGLRZ\u0663a "
    ibans = [
        "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30))) for _ in range(20_000)
    ]
    ibans += [f"{c}{rng.randrange(10**20):022d}" for c in ("DE", "GB", "NL", "1E", "D") * 2000]
    cards = [
        "".join(rng.choice("0123456789" * 20 + "\u0663") for _ in range(rng.randrange(12, 20)))
        for _ in range(40_000)
    ]
    with reference_paths():
        want = list(map(iban._mod97_ok, ibans)), list(map(detectors._card_brand_ok, cards))
    got = list(map(iban._mod97_ok, ibans)), list(map(detectors._card_brand_ok, cards))
    assert sum(want[0]) > 50 and 1000 < sum(want[1]) < 39_000
    assert got == want


def test_iban_candidates_are_those_the_pattern_finds() -> None:
    """Compact candidates matched by a plain repeat, grouped ones by the pattern: the
    same spans, with spaces, lower case, other scripts' digits and long runs around."""
    rng = random.Random(22)
    pieces = [
        "DE89", "3704", "0044", "0532", "0130", "00", "GB82WEST12345698765432", "A", "Z", "a",
        "x", "0", "9", " ", "  ", "\x00", "-", "\u0663", "é", "DE89370400440532013000",
        "1234567890123456789012345678901234",
    ]  # fmt: skip
    texts = [
        "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 14))) for _ in range(20_000)
    ]
    got = [[m.span() for m in iban._iban_matches(t)] for t in texts]
    want = [[m.span() for m in iban._IBAN.finditer(t)] for t in texts]
    assert sum(map(bool, want)) > 1500
    assert got == want


@pytest.mark.parametrize(
    "table",
    [detectors._CARD_MASK, iban._IBAN_MASK, encoded._RUN_TABLE],
    ids=["card", "iban", "runs"],
)
def test_masks_of_latin1_text_are_those_of_its_ascii_encoding(table: bytes) -> None:
    """Latin-1 text is masked from its own bytes: each table maps every byte above 0x7F
    as it maps the "?" that the ASCII encoding puts there."""
    rng = random.Random(20)
    alphabet = "az09 +(?-./@\x00\x7f\x80\xa0\xb2\xe9\xff\u0663\u20ac\ud800"
    texts = [
        "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40))) for _ in range(5000)
    ]
    texts += [bytes(range(256)).decode("latin-1"), "Chloé García", "plain ascii"]
    for text in texts:
        want = text.encode("ascii", "replace").translate(table)
        assert one_byte(text).translate(table) == want, text


def test_the_phone_starts_read_latin1_bytes_as_the_characters_they_are() -> None:
    """The phone mask reads a Latin-1 text's own bytes: what the pattern's look-behind and
    character class say of each character (a letter glues, the no-break space may be
    part of a number, others end one), and nothing of a Latin-1 character is a digit."""
    for c in range(0x80, 0x100):
        ch = chr(c)
        assert not re.match(r"\d", ch)
        cls = phone._START_MASK[c : c + 1]
        if ch == "\u00a0":
            assert cls == b"r"
        elif re.match(r"\w", ch):
            assert cls == b"w", hex(c)
        elif ch.isspace():
            assert cls == b"n", hex(c)
        else:
            assert cls == b"q", hex(c)
    # And the starts found from those bytes are those the pattern finds, around names,
    # symbols and digits of Latin-1 text.
    rng = random.Random(21)
    latin = [*"0123456789 +-()./", "\u00a0", "é", "ß", "²", "£", "\x85", "\u00bd", "Chloé "]
    texts = ["".join(rng.choice(latin) for _ in range(rng.randrange(1, 40))) for _ in range(20_000)]
    got = [[m.span() for m in _masked_matches(t) if not _long_run(m.group(1))] for t in texts]
    want = [[m.span() for m in _PHONE.finditer(t) if not _long_run(m.group(1))] for t in texts]
    assert sum(map(bool, want)) > 1000
    assert got == want


def test_hex_runs_refused_from_their_first_byte_are_those_no_decode_would_read() -> None:
    """Hex of text in any script, of binary data and of broken UTF-8, IBANs, hashes."""
    rng = random.Random(21)
    pieces = ["é", "€", "\U0001f600", "a@b.de", "日本", "\x00", "Ω"]
    blobs = [
        "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 12))).encode()
        for _ in range(3000)
    ]
    blobs += [os.urandom(rng.randrange(8, 40)) for _ in range(5000)]
    blobs += [b[1:] for b in blobs[:3000]] + [b"\xef\xbf\xbd" + b for b in blobs[3000:4000]]
    runs = [b.hex() for b in blobs] + [b.hex().upper() for b in blobs[:2000]]
    runs += [f"{c}{rng.randrange(10**20):020d}" for c in ("DE", "BE", "FE", "C3", "E2") * 500]
    got = [encoded._decode_run(r) for r in runs if len(r) >= 4]
    want = [decode_run(r) for r in runs if len(r) >= 4]
    assert sum(map(bool, want)) > 3000
    assert got == want


def test_decoded_runs_are_read_as_text_as_a_strict_decode_reads_them() -> None:
    rng = random.Random(16)
    pieces = [b"\xef\xbf\xbd", b"\xff", b"\xc3", b"\xa9", b"\xed\xa0\x80", b"\x00", b"\x07"]
    pieces += [b"a", b"@", b" ", "é".encode(), "€".encode(), "\U0001f600".encode()]
    blobs = [b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 12))) for _ in range(5000)]
    blobs += [os.urandom(rng.randrange(1, 24)) for _ in range(5000)]
    got = [encoded._text(b) for b in blobs]
    assert got == [text_of_bytes(b) for b in blobs]
    assert any(got) and not all(got)


@pytest.mark.parametrize("secrets", [False, True])
def test_protect_gives_the_same_value_with_and_without_the_fast_paths(secrets: bool) -> None:
    key = os.urandom(32)
    rows = random_rows(99, 2000, secrets=secrets)
    texts = Leaves.collect(rows).texts
    found = build_scanner(CONFIG).spans_raw(joined(rows))
    located = locate(texts, joined(rows), [f[0] for f in found], [f[1] for f in found])
    assert (located is None) == secrets  # "token=..." runs on across the NUL after it
    fast, fast_report = Privacy(CONFIG, Vault(key)).protect(rows)
    with reference_paths():
        plain, plain_report = Privacy(CONFIG, Vault(key)).protect(rows)
    assert fast == plain and fast_report == plain_report
    assert fast != rows


@pytest.mark.parametrize(
    "value",
    [
        {"a": "x\x00alice@example.com", "b": "bob@example.com", "c": ["\x00", "+1 415-555-0132"]},
        ["id-7", "\x00", "phone", "\x00\x004155550132", "carol@example.org\x00"],
    ],
)
def test_texts_holding_a_nul_are_protected_as_the_plain_path_does(value: object) -> None:
    key = os.urandom(32)
    fast, _ = Privacy(CONFIG, Vault(key)).protect(value)
    with reference_paths():
        plain, _ = Privacy(CONFIG, Vault(key)).protect(value)
    assert fast == plain
    assert "@" not in json.dumps(fast)


def test_a_value_found_across_two_texts_sends_them_to_be_scanned_alone() -> None:
    config = PrivacyConfig(
        enabled=True,
        recognizers=[Recognizer(name="CODE", pattern=r"K-\d+(?:\x00\d+)?")],
    )
    key = os.urandom(32)
    value = ["dave@example.com", "K-12", "34", "K-56", "x", "erin@example.com"]
    fast, report = Privacy(config, Vault(key)).protect(value)
    with reference_paths():
        plain, _ = Privacy(config, Vault(key)).protect(value)
    assert fast == plain
    assert fast[2] == "34" and fast[1].startswith("[CODE_") and fast[3].startswith("[CODE_")
    assert report.found == {"EMAIL": 2, "CODE": 2}


@pytest.mark.parametrize("twice", [False, True])
def test_each_value_is_replaced_where_it_is_in_its_text(twice: bool) -> None:
    value = {
        "a": "mail bob@example.com now",
        "b": "carol@example.org",
        "c": "dave@example.net, thanks",
        "d": "x",
        "e": "to erin@example.com" + (" and frank@example.com" if twice else ""),
    }
    out, report = Privacy(CONFIG, Vault(os.urandom(32))).protect(value)
    token = r"\[EMAIL_[a-z2-7]{10}\]"
    assert re.fullmatch(f"mail {token} now", out["a"])
    assert re.fullmatch(token, out["b"])
    assert re.fullmatch(f"{token}, thanks", out["c"])
    assert out["d"] == "x"
    assert re.fullmatch(f"to {token}" + (f" and {token}" if twice else ""), out["e"])
    assert report.found == {"EMAIL": 5 if twice else 4}


def large_text() -> str:
    text = joined(random_rows(5, 3000))
    assert len(text) >= CACHE_MIN
    return text


def test_a_large_text_scanned_again_gives_the_same_spans_from_the_cache() -> None:
    scanner = build_scanner(CONFIG)
    text = large_text()
    first = scanner.spans_raw(text)
    first.clear()  # what a caller does with its list does not reach the cache
    again = scanner.spans_raw(text)
    assert again == build_scanner(CONFIG).spans_raw(text)
    assert again
    assert scanner.spans_raw("".join([text])) == again  # equal text, another object


def test_a_secret_remembered_after_a_scan_is_found_in_the_same_large_text() -> None:
    scanner = build_scanner(CONFIG)
    text = large_text() + SEP + "the key is plain-looking-value-42"
    secret = (len(text) - 22, len(text), "SECRET")
    assert secret not in scanner.spans_raw(text)
    remember_secret("plain-looking-value-42")
    assert secret in scanner.spans_raw(text)


def test_the_cache_keeps_a_bounded_number_of_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    from codemode.privacy import scan

    monkeypatch.setattr(scan, "CACHE_CHARS", 3 * CACHE_MIN)
    scanner = Scanner(build_scanner(CONFIG).detectors)
    for i in range(10):
        scanner.spans_raw(f"{i}" * CACHE_MIN)
    assert scanner._cached_chars <= 3 * CACHE_MIN
    assert len(scanner._cache) == 3


class _Str(str):
    pass


class _Rows(Mapping[str, object]):
    """A mapping that is no dict (a tool's own record type)."""

    def __init__(self, data: dict[str, object]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> object:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def test_strings_are_collected_in_order_whatever_their_containers_types() -> None:
    # dicts and lists are told by their exact type first; subclasses, other mappings,
    # tuples, big ints and bytes take the isinstance branches, in the same order
    value = [
        {"a": "x", "b": [1, "y"], "c": 5, _Str("d"): _Str("z"), "e": {"f": "w"}, "g": 10**12},
        _Rows({"h": ("v", b"bob@example.com")}),
        _Str("s"),
        ("t", None),
    ]
    leaves = Leaves.collect(value)
    big = str(10**12)
    assert leaves.texts == [*"axbcdzegyfw", big, "h", "v", "bob@example.com", "s", "t"]
    assert [type(t) for t in leaves.texts].count(_Str) == 3
    out, _ = Privacy(CONFIG, Vault(os.urandom(32))).protect(value)
    assert out[1]["h"][1].startswith(b"[EMAIL_") and out[3] == ("t", None)
