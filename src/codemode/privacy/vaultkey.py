"""Which key a tenant's vault opens with when it was written before tenants had their own.

Under ``codemode serve --tenants`` a tenant's vault key is ``CODEMODE_PRIVACY_KEY`` of its
``env_file``, else the server's key derived for its name (``codemode.tenants.keys``).
Before that, every tenant's vault was written with the server's key as it is (its
``CODEMODE_PRIVACY_KEY``, else ``vault.key_file``), whatever its ``env_file`` said: under
the new key such a vault does not decrypt, its tokens saved in artifacts stop resolving,
and a value seen again gets another token (token ids are keyed with the vault key,
``privacy.tokens``). So when one stored entry does not open with the tenant's key and
opens with one of the server's, the tenant keeps that key, for encryption and token ids
alike, and a warning says so and how to move (``codemode privacy rekey``). An empty
vault, or a new tenant, gets its own key. The check reads one segment or one Redis field:
cheap, once per engine.

A tenant whose ``env_file`` makes its vault Redis had it in files then (the server's
environment chose the storage): while its Redis vault is empty and those files hold
entries, a warning says so (``stranded``); ``rekey`` moves them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .config import VaultConfig
from .keys import load_key, server_keys

__all__ = ["opener", "opens", "store_name", "stranded", "tenant_key"]

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


def opener(blob: bytes, keys: Sequence[tuple[bytes, str]]) -> tuple[bytes, str] | None:
    """The first of ``keys`` (key, where it is) that ``blob`` decrypts with."""
    return next((k for k in keys if opens(k[0], blob)), None)


def store_name(store: Any) -> str:
    """Where a vault store keeps its entries (for messages)."""
    directory = getattr(store, "directory", None)
    return str(directory) if directory is not None else f"redis {getattr(store, 'name', '?')}"


def _warn_once(name: str, message: str, *args: object) -> None:
    if name not in _warned:
        _warned.add(name)
        log.warning(message, *args)


def _move(workspace: Path, tenant: str) -> str:
    return (
        "stop the server and run: codemode privacy rekey --base "
        f"{workspace} --tenant {tenant} [--env-file FILE]"
    )


def tenant_key(
    config: VaultConfig,
    workspace: Path,
    env: Mapping[str, str],
    tenant: str,
    store_for: Callable[[bytes], Any],
) -> tuple[bytes, str]:
    """Tenant ``tenant``'s vault key and where it came from: ``load_key``'s, unless its
    vault (``store_for(key)``) was written with a server-wide key (see the module doc)."""
    key, where = load_key(config, workspace, env, tenant=tenant)
    store = store_for(key)
    blob = store.sample()
    if blob is None or opens(key, blob):
        return key, where  # new, empty, or its own key's
    found = opener(blob, server_keys(config))
    if found is None:
        return key, where  # written with another key: reading it says so
    name = store_name(store)
    legacy = (
        f"{found[1]} as it is, instead of its own key ({where}): its vault ({name}) was "
        "written with that key "
        "before each tenant had a key of its own, so it keeps it (its tokens still "
        "resolve; it shares the key with the server). To move it to its own key, keeping "
        f"its tokens, {_move(workspace, tenant)}"
    )
    _warn_once(name, "privacy: the vault key of tenant %s is %s", tenant, legacy)
    return found[0], legacy


def stranded(store: Any, key: bytes, files: Path, workspace: Path, tenant: str) -> str | None:
    """What to tell when tenant ``tenant``'s vault ``store`` (Redis) is empty but its
    vault in ``files`` (where it was before its ``env_file`` chose Redis) is not."""
    from .vault import FileStore

    if getattr(store, "directory", None) is not None or FileStore(files, key).sample() is None:
        return None
    if store.sample() is not None:
        return None
    told = (
        f"tenant {tenant}'s vault is in {store_name(store)} (its env_file), which is empty, "
        f"but {files} holds entries written before (when the server's environment chose "
        f"the storage): their tokens do not resolve. To move them there, {_move(workspace, tenant)}"
    )
    _warn_once(str(files), "privacy: %s", told)
    return told
