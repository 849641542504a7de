"""Which key a tenant's vault opens with when it was written before tenants had their own.

Under ``codemode serve --tenants`` a tenant without ``CODEMODE_PRIVACY_KEY`` in its
``env_file`` gets the server's key derived for its name (``codemode.tenants.keys``).
Before that, every tenant's vault was written with the server's key as it is
(``vault.key_file`` or the server's ``CODEMODE_PRIVACY_KEY``): under the derived key such
a vault does not decrypt, its tokens saved in artifacts stop resolving, and a value seen
again gets another token (token ids are keyed with the vault key, ``privacy.tokens``).
So when one stored entry opens with the server's key and not with the derived one, the
tenant keeps the server's key, for encryption and token ids alike, and a warning says so
and how to move (``codemode privacy rekey``). An empty vault, or a new tenant, gets the
derived key. The check reads one segment or one Redis field: cheap, once per engine.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .config import KEY_ENV, VaultConfig
from .keys import load_key, shared_key

__all__ = ["opens", "store_name", "tenant_key"]

log = logging.getLogger(__name__)

_warned: set[str] = set()


def opens(key: bytes, blob: bytes) -> bool:
    """Whether ``blob`` (a segment or a Redis field) decrypts with ``key``."""
    from cryptography.fernet import Fernet, InvalidToken

    try:
        Fernet(key).decrypt(blob)
    except InvalidToken:
        return False
    return True


def store_name(store: Any) -> str:
    """Where a vault store keeps its entries (for messages)."""
    directory = getattr(store, "directory", None)
    return str(directory) if directory is not None else f"redis {getattr(store, 'name', '?')}"


def tenant_key(
    config: VaultConfig,
    workspace: Path,
    env: Mapping[str, str],
    tenant: str,
    store_for: Callable[[bytes], Any],
) -> tuple[bytes, str]:
    """Tenant ``tenant``'s vault key and where it came from: ``load_key``'s, unless its
    vault (``store_for(key)``) was written with the server-wide key (see the module doc)."""
    key, where = load_key(config, workspace, env, tenant=tenant)
    shared = None if env.get(KEY_ENV) else shared_key(config)
    if shared is None:
        return key, where
    store = store_for(key)
    blob = store.sample()
    if blob is None or opens(key, blob) or not opens(shared[0], blob):
        return key, where  # new, empty, its own key's, or unreadable (its error says so)
    name = store_name(store)
    legacy = (
        f"{shared[1]} as it is, NOT derived for tenant {tenant}: its vault ({name}) was "
        "written with that key before each tenant had a key of its own, so it keeps it "
        "(its tokens still resolve; it shares the key with the server). To move it to "
        "a key of its own, keeping its tokens, stop the server and run: codemode privacy "
        f"rekey --base {workspace} --tenant {tenant} [--env-file FILE]"
    )
    if name not in _warned:
        _warned.add(name)
        log.warning("privacy: the vault key of tenant %s is %s", tenant, legacy)
    return shared[0], legacy
