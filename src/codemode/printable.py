"""Text the agent's code controls, made safe to show a person on one line.

Code can put any character into a tool argument's name, an exception's type name, a
skill's description or a cell's first line. Shown raw on a terminal, control characters
(``ESC [2K``, ``CR``, cursor moves), C1 controls and Unicode format characters (bidi
overrides such as U+202E) can erase or rewrite what the person reads: an approval prompt
could show a call other than the one it approves, an audit listing could hide a line.
:func:`printable` spells each such character as a ``\\uXXXX`` escape instead, which is
also a valid escape inside a JSON string, so JSON output stays JSON with the same value.
"""

from __future__ import annotations

import re

# Every control, format (Cf), surrogate and line/paragraph separator code point of
# Unicode 15 (tag characters, used to smuggle hidden text, included), plus the invisible
# ones of other categories: variation selectors, Mongolian and Hangul fillers.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    "\u115f\u1160\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\ud800-\udfff"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


def _escape(match: re.Match[str]) -> str:
    cp = ord(match.group())
    if cp > 0xFFFF:  # a JSON string spells it as its UTF-16 surrogate pair
        cp -= 0x10000
        return f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}"
    return f"\\u{cp:04x}"


def printable(text: str) -> str:
    """``text`` with control, format and line-separator characters (and lone
    surrogates) written as ``\\uXXXX``: one line that shows what it holds."""
    return _UNSAFE.sub(_escape, text)


# What a terminal takes as a command rather than text: C0 controls (but tab, line feed and
# carriage return, which ordinary output uses), DEL and the C1 controls (U+009B is CSI).
_DRIVES_TERMINAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def terminal_output(text: str) -> str:
    """Output of the agent's code for a terminal: multi-line, tabs and ``\\r`` kept, every
    other control character spelt ``\\uXXXX``.

    The code prints what it handled (a web page, a tool's result, a file): an ``ESC`` in
    it would let that text set the operator's clipboard (OSC 52), window title or links,
    clear or rewrite the screen, or query the terminal so that its answer is typed in.
    """
    return _DRIVES_TERMINAL.sub(_escape, text)


__all__ = ["printable", "terminal_output"]
