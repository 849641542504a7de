"""The credentials net as a privacy detector: entity ``SECRET``, always redacted.

The net itself (remembered ``${VAR}`` values, secret-looking environment variables,
credential shapes) is :mod:`codemode.redact`, which also serves text outside the privacy
layer; this module only plugs it into the scanner.
"""

from __future__ import annotations

from collections.abc import Iterator

from codemode.redact import find_secrets

__all__ = ["SecretDetector"]


class SecretDetector:
    """:func:`codemode.redact.find_secrets` as a detector (entity ``SECRET``)."""

    entity = "SECRET"
    entities = ("SECRET",)

    def find(self, text: str) -> Iterator[tuple[int, int, str]]:
        for start, end in find_secrets(text):
            if end > start:
                yield start, end, "SECRET"
