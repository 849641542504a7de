"""Values just restored into a sink's arguments, where they may come back: its result or
error may echo them, and no detector need recognise them out of context there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from codemode.errors import PrivacyBlocked
from codemode_worker.protocol import Blob

from .walk import _as_text

__all__ = ["replace_literals", "withhold_echoed_binary"]


def withhold_echoed_binary(value: Any, literal: Mapping[str, str], *, where: str) -> None:
    """Raise when binary data (which no detector reads and no token can be put into)
    holds a value just restored into the call: a sink that echoes its arguments into an
    image or a file would otherwise hand the real value to the sandbox."""
    # Values of 4+ characters: a shorter one ("US", a deny-list code) is in random bytes
    # often enough to withhold an innocent image (2 bytes: every 64 KB on average).
    needles = [
        v.encode(e) for v in literal if len(v) >= 4 for e in ("utf-8", "utf-16-le", "utf-16-be")
    ]
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
        elif isinstance(v, bytes | bytearray | Blob):
            data = bytes(v.data if isinstance(v, Blob) else v)
            if any(n in data for n in needles) and _as_text(data)[0] is None:
                raise PrivacyBlocked(
                    f"binary data{where} holds a value restored into this call's arguments; "
                    "it was withheld, as binary content cannot carry a token instead"
                )


def replace_literals(text: str, literal: Mapping[str, str]) -> str:
    for value, token in literal.items():
        if value and value in text:
            text = text.replace(value, token)
    return text
