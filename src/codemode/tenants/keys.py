"""A tenant's own key, derived from the server's, for a tenant whose ``env_file`` sets none.

Under ``codemode serve --tenants`` the privacy vault's key and the audit key of a tenant come
from its ``env_file`` when it sets them. When it does not, the server's key is not used as
it is: one key for all made one tenant's tokens and argument HMACs equal to another's for
the same value (and one tenant's ciphertexts readable with another's key). Each tenant gets
HKDF-SHA256 (RFC 5869) of the server's key, with the purpose and the tenant's name as
``info``: a key of its own, which says nothing of the server's or of another tenant's.
Single-workspace serving never comes here: its keys stay what they were.
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["derive"]

_SALT = b"codemode-tenant-key-v1"


def derive(master: bytes, purpose: str, tenant: str, length: int = 32) -> bytes:
    """``length`` bytes for ``tenant`` and ``purpose`` (``privacy-vault``, ``audit``)."""
    prk = hmac.digest(_SALT, master, hashlib.sha256)  # HKDF-Extract
    info = f"{purpose}\0{tenant}".encode()
    out, block, counter = b"", b"", 1
    while len(out) < length:  # HKDF-Expand
        block = hmac.digest(prk, block + info + bytes([counter]), hashlib.sha256)
        out += block
        counter += 1
    return out[:length]
