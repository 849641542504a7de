"""Bytes of values as JSON, the measure every ``codemode_*_bytes`` figure and span size
uses, and arguments as canonical JSON (sorted keys), what a span hashes.

A module of its own so the tally's fold (``tally``) measures arguments without importing
the metrics layer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any


def _parts(*, sort_keys: bool) -> Callable[[Any, int], Iterable[str]]:
    """``json.JSONEncoder(sort_keys=..., default=str, ensure_ascii=False)``'s chunks of a
    value (called with the value and 0), the C encoder built once: ``encode`` builds one
    (and its circular-reference map) per call, half the cost of a tool call's small
    arguments. Without that map a circular value raises ``RecursionError`` (callers fall
    back to ``repr``, as for other failures)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: the encoder's own method
        encoder = json.JSONEncoder(sort_keys=sort_keys, default=str, ensure_ascii=False)
        return lambda value, _level: encoder.iterencode(value)
    parts: Callable[[Any, int], Iterable[str]] = make(
        None, str, json.encoder.encode_basestring, None, ": ", ", ", sort_keys, False, True
    )
    return parts


_canonical_parts = _parts(sort_keys=True)
_plain_parts = _parts(sort_keys=False)
_join = "".join


def _plain(value: Any) -> str:
    return _join(_plain_parts(value, 0))


_UNENCODABLE = (TypeError, ValueError, RecursionError)


def size_of(value: Any) -> int:
    """Bytes of ``value`` as JSON in UTF-8 (bytes and strings as themselves)."""
    if type(value) is str:  # the common case first: one type check
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    if value is None:
        return 0
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    try:
        text = _plain(value)
    except _UNENCODABLE:  # circular, or a default that failed
        text = repr(value)
    return len(text.encode("utf-8", "surrogatepass"))


def canonical(value: Any) -> str:
    """``value`` as canonical JSON (sorted keys), or its ``repr`` when it has none (keys
    of mixed types, circular)."""
    try:
        return _join(_canonical_parts(value, 0))
    except _UNENCODABLE:
        return repr(value)


def args_size(args: Any) -> int:
    """Bytes of arguments (or of their canonical JSON, ``canonical``) as canonical JSON in
    UTF-8: what a span's ``codemode.tool.arguments.bytes`` says."""
    return size_of(args if type(args) is str else canonical(args))


__all__ = ["args_size", "canonical", "size_of"]
