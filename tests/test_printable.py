"""``printable``: every character that can hide or rewrite what a person reads is spelled
as an escape, and JSON output keeps its value."""

from __future__ import annotations

import json
import unicodedata

from codemode.printable import printable

INVISIBLE = [
    "\x1b[2K",  # a terminal escape
    "\u202e",  # a bidi override
    "\U000e0041\U000e0042",  # tag characters: hidden ASCII ("AB")
    "\ufe0f",  # a variation selector
    "\U000e0100",  # a supplementary variation selector
    "\u3164\u115f\uffa0",  # Hangul fillers
    "\u180b",  # a Mongolian free variation selector
    "\U0001d173",  # a musical format control
]


def test_every_hiding_character_is_escaped_and_json_keeps_the_value() -> None:
    for hidden in INVISIBLE:
        text = f"run {hidden}tool"
        shown = printable(text)
        assert shown.isascii() and shown.isprintable(), repr(shown)
        assert json.loads(f'"{shown}"') == text


def test_every_control_and_format_character_of_unicode_is_escaped() -> None:
    for cp in range(0x110000):
        c = chr(cp)
        if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            assert printable(c) != c, hex(cp)


def test_ordinary_text_in_any_script_is_left_as_it_is() -> None:
    for text in ("Zoë's café", "東京 2026", "مرحبا", "emoji 🎉 ok", "tab\\tless"):
        assert printable(text) == text
