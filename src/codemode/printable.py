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

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\ufeff\ufff9-\ufffb\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def printable(text: str) -> str:
    """``text`` with control, format and line-separator characters (and lone
    surrogates) written as ``\\uXXXX``: one line that shows what it holds."""
    return _UNSAFE.sub(_escape, text)


__all__ = ["printable"]
