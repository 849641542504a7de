"""The token format: ``[EMAIL_k7d2m9x4qp]``.

A token is the entity type, an underscore and ten characters of base32 (``a-z2-7``) taken
from a keyed BLAKE2b MAC of the type and the value, in square brackets. So:

- it is a plain string the agent's code can pass around, print, store and put inside a
  longer text ("Dear [PERSON_ab3k...],");
- the same value gets the same token in every session of a vault (joins and
  de-duplication in code still work), and a different key gives different tokens;
- it cannot be guessed or enumerated: without the key, ``[EMAIL_aaaaaaaaaa]`` is as
  likely as any other of 2^50 ids, and the vault refuses ids it did not issue;
- no detector matches inside one (the scanner skips existing tokens), so scanning text
  twice is harmless.
"""

from __future__ import annotations

import hashlib
import re

__all__ = [
    "ENTITY_NAME",
    "TOKEN_RE",
    "TokenMaker",
    "is_entity_name",
    "make_token",
    "token_entity",
]

ID_LENGTH = 10
# Each byte of a keyed BLAKE2b digest -> one base32 character (its low 5 bits).
_TO_BASE32 = bytes(b"abcdefghijklmnopqrstuvwxyz234567"[i & 31] for i in range(256))
TOKEN_RE = re.compile(r"\[([A-Z][A-Z0-9_]{0,39})_([a-z2-7]{10})\]")
"""A token anywhere in a text; group 1 is the entity type."""

ENTITY_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,39}")
"""What an entity type may be called (custom recognizers and deny-lists included)."""


def is_entity_name(name: str) -> bool:
    return bool(ENTITY_NAME.fullmatch(name))


def make_token(key: bytes, entity: str, value: str, salt: int = 0) -> str:
    """The token of ``value`` as ``entity`` under ``key`` (``salt`` > 0 after a collision)."""
    msg = f"{entity}\x00{value}\x00{salt}".encode("utf-8", "surrogatepass")
    digest = hashlib.blake2b(msg, key=key[:64], digest_size=ID_LENGTH).digest()
    return f"[{entity}_{digest.translate(_TO_BASE32).decode('ascii')}]"


class TokenMaker:
    """``make_token`` under one key, keyed once: each token then costs a copy of the
    keyed state instead of a fresh key schedule (a third less per value)."""

    def __init__(self, key: bytes) -> None:
        self._base = hashlib.blake2b(key=key[:64], digest_size=ID_LENGTH)

    def token(self, entity: str, value: str, salt: int = 0) -> str:
        h = self._base.copy()
        h.update(f"{entity}\x00{value}\x00{salt}".encode("utf-8", "surrogatepass"))
        return f"[{entity}_{h.digest().translate(_TO_BASE32).decode('ascii')}]"

    def tokens(self, items: list[tuple[str, str]]) -> list[str]:
        """``token(entity, value)`` of each item (salt 0), without a call per item."""
        copy = self._base.copy
        out: list[str] = []
        add = out.append
        for entity, value in items:
            h = copy()
            h.update(f"{entity}\x00{value}\x000".encode("utf-8", "surrogatepass"))
            add(f"[{entity}_{h.digest().translate(_TO_BASE32).decode('ascii')}]")
        return out


def token_entity(token: str) -> str:
    """The entity type a well-formed token names."""
    m = TOKEN_RE.fullmatch(token)
    if m is None:
        raise ValueError(f"not a token: {token!r}")
    return m.group(1)
