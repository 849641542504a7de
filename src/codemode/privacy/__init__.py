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

_WHERE = {
    "PrivacyConfig": "config",
    "Privacy": "engine",
    "PrivacyBlocked": "engine",
    "Report": "engine",
    "engine_for": "layers",
    "scrub": "layers",
    "stream_scanner": "layers",
    "StreamScanner": "stream",
    "Vault": "vault",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'codemode.privacy' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f".{module}", __name__), name)
