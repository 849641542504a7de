"""Context words glued to a value: ``SSN123-45-6789``, ``card4111...``, ``tel+1415...``.

A number glued to a word is read as part of it (an id such as ``SKU4111...``, the
digits of ``DE89...``), unless that word says what the number is: the detectors then
read the word's end as the value's start. Shared by the card and phone detectors.
"""

from __future__ import annotations

__all__ = ["CARD_WORDS", "PHONE_WORDS", "word_before"]

CARD_WORDS = frozenset({"card", "cc", "visa", "amex", "mastercard", "creditcard"})
"""Words a card number may follow with nothing between (``card4111...``)."""
PHONE_WORDS = frozenset(
    {"tel", "phone", "telephone", "mobile", "cell", "fax", "telefon", "handy", "mobil", "tlf"}
)
"""Words a phone number written with "+" or "(" may follow with nothing between; an SSN's
are the SSN detector's own ("SSN", "social security")."""


def word_before(text: str, at: int, words: frozenset[str]) -> bool:
    """Whether the ASCII letters right before ``at`` are one of ``words`` (lower case),
    a whole word: a number glued to a context word is a value ("SSN", "card", "tel"),
    glued to any other word an id (``SKU4111...``, ``DE89...``)."""
    start = at
    while (
        start > 0 and at - start <= 12 and text[start - 1].isascii() and text[start - 1].isalpha()
    ):
        start -= 1
    if start == at or (start > 0 and text[start - 1].isalnum()):
        return False
    return text[start:at].lower() in words
