"""What the checker needs to know about a cell without parsing it: where its strings and
comments are, on which lines its top-level statements start, where its ``;`` split
statements. Regular expressions do it at C speed; ``ast.parse`` of a 200-line cell costs
more than the whole check may (1 ms).

Exact for the cells the worker can run, as Python's tokenizer decides quotes and ``#``
the same way from the first character on. Two limits, both on the safe side:

- an f-string's text is code (its ``{...}`` are), so words in it lead to a parse;
- from Python 3.12 an f-string may nest quotes of its own kind, which a regular
  expression cannot follow: there, nothing after the first f-string is taken for a string.

Statement starts are a guess (a line at column 0 that is not inside a string, not a
clause like ``else:``, not the continuation of a decorator or of a backslash); the checker
verifies it by parsing, and parses the whole cell when the guess was wrong.
"""

from __future__ import annotations

import bisect
import re
import sys
from dataclasses import dataclass

_STRING_OR_COMMENT = re.compile(
    r"\#[^\r\n]*"
    r"|'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*(?:'''|\Z)"
    r'|"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*(?:"""|\Z)'
    r"|'[^'\\\r\n]*(?:\\.[^'\\\r\n]*)*(?:'|$)"
    r'|"[^"\\\r\n]*(?:\\.[^"\\\r\n]*)*(?:"|$)',
    re.DOTALL | re.MULTILINE,
)
_PREFIX = frozenset("rRbBuUfF")
# A line at column 0 that is not blank, a comment, a closing bracket or a clause.
_LINE_START = re.compile(r"^(?!(?:else|elif|except|finally)\b)[^\s#)\]}]", re.MULTILINE)
_NESTED_FSTRINGS = sys.version_info >= (3, 12)


@dataclass(slots=True)
class Layout:
    """A cell's strings, comments, lines and statement starts."""

    code: str
    masked_starts: list[int]
    """Start offsets of the strings and comments whose text is not code (sorted)."""
    masked_ends: list[int]
    long_starts: list[int]
    """Start and end offsets of the strings that span lines, f-strings included."""
    long_ends: list[int]
    line_offsets: list[int]
    """Offset of each line's first character; line ``n`` (1-based) is ``[n - 1]``."""

    def masked(self, pos: int) -> bool:
        """Whether ``pos`` is inside a string or comment (not code)."""
        i = bisect.bisect_right(self.masked_starts, pos) - 1
        return i >= 0 and pos < self.masked_ends[i]

    def in_long_string(self, pos: int) -> bool:
        i = bisect.bisect_right(self.long_starts, pos) - 1
        return i >= 0 and self.long_starts[i] < pos < self.long_ends[i]

    def line_of(self, pos: int) -> int:
        return bisect.bisect_right(self.line_offsets, pos)

    def statement_starts(self) -> list[int]:
        """The lines (1-based, sorted) on which top-level statements seem to start."""
        code, long = self.code, bool(self.long_starts)
        lines: list[int] = []
        decorated = False
        for m in _LINE_START.finditer(code):
            pos = m.start()
            if (long and self.in_long_string(pos)) or (pos >= 2 and code[pos - 2] == "\\"):
                continue
            if decorated:  # the def or class a decorator belongs to
                decorated = code[pos] == "@"
                continue
            decorated = code[pos] == "@"
            lines.append(self.line_of(pos))
        return lines


def layout(code: str) -> Layout:
    masked_starts: list[int] = []
    masked_ends: list[int] = []
    long_starts: list[int] = []
    long_ends: list[int] = []
    for m in _STRING_OR_COMMENT.finditer(code):
        start, end = m.span()
        if code[start] == "#":
            masked_starts.append(start)
            masked_ends.append(end)
            continue
        prefix_start = start
        while prefix_start > 0 and start - prefix_start < 2 and code[prefix_start - 1] in _PREFIX:
            prefix_start -= 1
        fstring = "f" in code[prefix_start:start].lower()
        if "\n" in m.group():
            long_starts.append(start)
            long_ends.append(end)
        if not fstring:
            masked_starts.append(start)
            masked_ends.append(end)
        elif _NESTED_FSTRINGS:
            break  # the rest is code (see the module doc)
    offsets = [0]
    pos = code.find("\n")
    while pos != -1:
        offsets.append(pos + 1)
        pos = code.find("\n", pos + 1)
    return Layout(code, masked_starts, masked_ends, long_starts, long_ends, offsets)


__all__ = ["Layout", "layout"]
