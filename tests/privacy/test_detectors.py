"""Detectors: what counts as personal data, and the look-alikes that do not."""

from __future__ import annotations

import pytest

from codemode.privacy.config import PrivacyConfig, Recognizer
from codemode.privacy.detectors import DenyList, RegexDetector, builtin_detectors
from codemode.privacy.engine import build_scanner
from codemode.privacy.scan import Scanner
from codemode.privacy.tokens import TOKEN_RE, make_token

SCANNER = Scanner(builtin_detectors(phone_regions=("US", "GB", "DE", "FR")))


def found(text: str, scanner: Scanner = SCANNER) -> list[tuple[str, str]]:
    return [(s.entity, text[s.start : s.end]) for s in scanner.spans(text)]


@pytest.mark.parametrize(
    ("text", "entity", "value"),
    [
        (
            "mail alice.o'neil+crm@mail.example.co.uk now",
            "EMAIL",
            "alice.o'neil+crm@mail.example.co.uk",
        ),
        ("écrire à josé.garcía@exemple.fr", "EMAIL", "josé.garcía@exemple.fr"),
        ("call +44 20 7946 0958 today", "PHONE", "+44 20 7946 0958"),
        ("call (415) 555-0132 today", "PHONE", "(415) 555-0132"),
        ("call 415.555.0132x204 today", "PHONE", "415.555.0132x204"),
        ("Tel.: 4155550132", "PHONE", "4155550132"),
        ("Handy 0151 23456789", "PHONE", "0151 23456789"),
        ("card 4111 1111 1111 1111 exp 12/29", "CREDIT_CARD", "4111 1111 1111 1111"),
        ("amex 3782-822463-10005", "CREDIT_CARD", "3782-822463-10005"),
        ("ssn 123-45-6789", "US_SSN", "123-45-6789"),
        ("SSN: 123456789", "US_SSN", "123456789"),
        ("iban DE89 3704 0044 0532 0130 00 thanks", "IBAN", "DE89 3704 0044 0532 0130 00"),
        ("iban GB82WEST12345698765432", "IBAN", "GB82WEST12345698765432"),
        ("from 203.0.113.7:443", "IP_ADDRESS", "203.0.113.7"),
        ("from 2001:db8::8a2e:370:7334 via", "IP_ADDRESS", "2001:db8::8a2e:370:7334"),
    ],
)
def test_each_type_is_found_with_its_whole_value(text: str, entity: str, value: str) -> None:
    assert (entity, value) in found(text)


@pytest.mark.parametrize(
    "text",
    [
        "order 4155550132 shipped",  # a bare run of 10 digits is an id
        "id=4155550132",
        "released 2024-01-15T10:30:00Z",
        "version 10.4.12 and 2.0.0-rc.1",
        "uuid 123e4567-e89b-12d3-a456-426614174000",
        "total 1,234,567.89 USD or 1.234.567,89 €",
        "SKU 123-456-7890",
        "isbn 978-3-16-148410-0",
        "tracking 4111111111111112",  # fails Luhn
        "ssn 666-12-3456 and 000-12-3456",  # never issued
        "GB00WEST12345698765432",  # wrong IBAN check digits
        "mac 00:1a:2b:3c:4d:5e at 10:30:00",
        "coordinates 48.858844, 2.294351",
        "std::vector and a::b",
    ],
)
def test_look_alikes_are_not_reported(text: str) -> None:
    assert found(text) == []


def test_a_key_before_a_bare_number_is_context_in_joined_json() -> None:
    assert found("phone\x004155550132") == [("PHONE", "4155550132")]
    assert found("order_id\x004155550132") == []


def test_nothing_is_detected_inside_an_existing_token() -> None:
    token = make_token(b"k" * 32, "PHONE", "4155550132")
    text = f"see {token} and [EMAIL_2345672345] and [CREDIT_CARD_4222222222]"
    assert found(text) == []
    assert len(TOKEN_RE.findall(text)) == 3


def test_custom_recognizers_deny_lists_and_allow_lists_come_from_config() -> None:
    cfg = PrivacyConfig(
        enabled=True,
        recognizers=(
            Recognizer(name="EMPLOYEE_ID", pattern=r"EMP-\d{6}"),
            Recognizer(name="BADGE", pattern=r"\b\d{5}\b", context=("badge",)),
        ),
        deny={"CUSTOMER": ("Acme Corp", "Globex")},
        allow=("support@example.com",),
    )
    scanner = build_scanner(cfg)
    text = "room 54321: EMP-123456 of acme corp, badge 12345; mail support@example.com"
    assert found(text, scanner) == [
        ("EMPLOYEE_ID", "EMP-123456"),
        ("CUSTOMER", "acme corp"),
        ("BADGE", "12345"),
    ]


def test_excluded_types_are_left_for_the_code_to_compute_on() -> None:
    scanner = build_scanner(PrivacyConfig(enabled=True, exclude=("EMAIL",)))
    assert found("alice@example.com +1 415 555 0132", scanner) == [("PHONE", "+1 415 555 0132")]


def test_a_custom_recognizer_with_a_bad_pattern_is_a_clear_config_error() -> None:
    with pytest.raises(ValueError, match="not a regular expression"):
        Recognizer(name="X", pattern="(")
    with pytest.raises(ValueError, match="empty string"):
        Recognizer(name="X", pattern="a*")
    with pytest.raises(ValueError, match="entity type name"):
        Recognizer(name="lower", pattern="x")


def test_regex_and_deny_detectors_report_their_own_type() -> None:
    assert list(RegexDetector("TICKET", r"T-\d+").find("T-12 and T-3")) == [
        (0, 4, "TICKET"),
        (9, 12, "TICKET"),
    ]
    assert list(DenyList("NAME", []).find("anything")) == []


@pytest.mark.parametrize(
    "text",
    [
        "4111111111111111",  # the whole text
        "x 4111-1111-1111-1111",  # at the end
        "4111 1111 1111 1111\x00phone",  # before a NUL-joined next text
        "ids 12 4111111111111111 and 5500 0000 0000 0004 é",  # two runs, non-ASCII after
    ],
)
def test_a_card_is_found_wherever_its_run_of_digits_sits(text: str) -> None:
    cards = [v for e, v in found(text) if e == "CREDIT_CARD"]
    assert cards and all(v.replace(" ", "").replace("-", "").isdigit() for v in cards)


@pytest.mark.parametrize(
    "text",
    ["4111111111111111.5", "v4111111111111111", "4111111111111111-12", "1234 5678 9012"],
)
def test_digits_that_only_look_like_a_card_are_not_one(text: str) -> None:
    assert "CREDIT_CARD" not in [e for e, _ in found(text)]


@pytest.mark.parametrize(
    ("text", "entity", "value"),
    [
        ("card4111111111111111", "CREDIT_CARD", "4111111111111111"),
        ("paid with Visa4111 1111 1111 1111 today", "CREDIT_CARD", "4111 1111 1111 1111"),
        ("payment_cc5555-5555-5555-4444", "CREDIT_CARD", "5555-5555-5555-4444"),
        ("SSN123-45-6789", "US_SSN", "123-45-6789"),
        ("ssn#123-45-6789 on file", "US_SSN", "123-45-6789"),
        ("tel+14155550123", "PHONE", "+14155550123"),
        ("Phone(415) 555-0132 ext", "PHONE", "(415) 555-0132"),
        ("mobile+44 20 7946 0958", "PHONE", "+44 20 7946 0958"),
    ],
)
def test_a_value_glued_to_the_word_that_names_it_is_found(
    text: str, entity: str, value: str
) -> None:
    assert found(text) == [(entity, value)]


@pytest.mark.parametrize(
    "text",
    [
        "SKU4111111111111111",  # glued to any other word: an id
        "discard4111111111111111",  # a card word inside a longer word
        "ID4111111111111111 and DE4111111111111111",
        "cardX4111111111111111",
        "ABC123-45-6789",  # a part number
        "hotel+14155550123",  # a phone word inside a longer word
        "x+14155550123 and C++14155550123",
        "card4111111111111112",  # glued to the word, but no card (Luhn)
        "tel+1",
    ],
)
def test_a_number_glued_to_another_word_stays_part_of_it(text: str) -> None:
    assert found(text) == []
