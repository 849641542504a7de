"""The credentials net as a privacy detector: entity ``SECRET``, always redacted.

The net itself (remembered ``${VAR}`` values, secret-looking environment variables,
credential shapes) is :mod:`codemode.redact`, which also serves text outside the privacy
layer; this module only plugs it into the scanner.
"""

from __future__ import annotations

from collections.abc import Iterator

from codemode.redact import find_secrets, known_multiline, secrets_generation

__all__ = ["SecretDetector"]


class SecretDetector:
    """:func:`codemode.redact.find_secrets` as a detector (entity ``SECRET``)."""

    entity = "SECRET"
    entities = ("SECRET",)
    local_context = True

    @property
    def line_local(self) -> bool:
        # A PEM block runs to the end of the text until its END line (a span crossing
        # any cut); other shapes hold their secret on one line, after a context that
        # the stream scanner keeps. Only a remembered multi-line value spans lines.
        return not known_multiline()

    @property
    def generation(self) -> int:
        """Changes when the remembered secrets do (the scanner's cache of results)."""
        return secrets_generation()

    def find(self, text: str) -> Iterator[tuple[int, int, str]]:
        for start, end in find_secrets(text):
            if end > start:
                yield start, end, "SECRET"
