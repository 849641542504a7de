"""Personal data tokenized before it reaches the model, restored only where a tool needs it.

See docs/privacy.md. The parts:

- ``detectors`` / ``scan``: what counts as personal data (offline, no model download);
  ``ner``: names and addresses through an optional spaCy model;
- ``secrets``: the credentials net (:mod:`codemode.redact`) as the ``SECRET`` detector;
- ``tokens`` / ``vault``: the token format and the encrypted token <-> value store;
- ``engine``: ``Privacy``, the operations; ``stream``: ``StreamScanner`` for chunked output;
- ``layers`` / ``capability``: how it plugs into the tool-call chain, the run chain and
  ``codemode serve``'s replies.

Cheap to import: everything loads on use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import PrivacyConfig
    from .engine import Privacy, PrivacyBlocked, Report
    from .layers import engine_for, scrub, stream_scanner
    from .stream import StreamScanner
    from .vault import Vault

__all__ = [
    "Privacy",
    "PrivacyBlocked",
    "PrivacyConfig",
    "Report",
    "StreamScanner",
    "Vault",
    "engine_for",
    "scrub",
    "stream_scanner",
]


def __getattr__(name: str) -> Any:
    # Loaded on use: ``codemode.config`` and the CLI import this package cheaply.
    if name == "PrivacyConfig":
        from .config import PrivacyConfig

        return PrivacyConfig
    if name in ("Privacy", "PrivacyBlocked", "Report"):
        from . import engine

        return getattr(engine, name)
    if name in ("engine_for", "scrub", "stream_scanner"):
        from . import layers

        return getattr(layers, name)
    if name == "StreamScanner":
        from .stream import StreamScanner

        return StreamScanner
    if name == "Vault":
        from .vault import Vault

        return Vault
    raise AttributeError(f"module 'codemode.privacy' has no attribute {name!r}")
