"""``codemode privacy rekey``: move a tenant's vault from the server's key to its own.

A tenant of ``serve --tenants`` whose vault was written with the server's key before
tenants had keys of their own keeps that key (``vaultkey``). This re-encrypts its entries
under its own key (its env_file's, else the server's derived for its name), each under
the token it has: saved tokens still resolve, and a value seen again gets its token while
the entry lives (``Vault`` finds a value it holds before hashing it). Run it with the
server stopped: a running server holds the old key and would go on writing with it.

Nothing is lost: the entries are written beside the vault under the new key, then swapped
in at once (a directory exchange, ``renameat2``; in Redis, two ``RENAME`` in one
``MULTI`` under ``WATCH``, retried when a writer changed the vault meanwhile), and the
old vault is kept beside it, named in the output, for the operator to remove. A vault
left in files when the tenant's ``env_file`` chose Redis (``vaultkey.stranded``) is moved
into Redis the same way, under the tenant's key.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from codemode.errors import ConfigError

from .config import VaultConfig
from .keys import load_key, server_keys
from .vault import Entry, FileStore, RedisStore
from .vaultkey import opener, opens, store_name

__all__ = ["rekey"]

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def rekey(
    config: VaultConfig, workspace: Path, settings: Any, env: Mapping[str, str], tenant: str
) -> str:
    """Re-encrypt tenant ``tenant``'s vault under its own key (moving it into its Redis
    vault when it was left in files, ``vaultkey.stranded``); what was done, for the
    operator (nothing, when nothing is on another key or in another place)."""
    from .layers import vault_dir

    key, where = load_key(config, workspace, env, tenant=tenant)
    directory = vault_dir(workspace, tenant)
    redis = settings is not None and settings.storage == "redis" and settings.redis_url
    name = f"{settings.redis_prefix}:privacy:{tenant}:vault" if redis else ""
    store: FileStore | RedisStore = (
        RedisStore(settings.redis_url, name, key) if redis else FileStore(directory, key)
    )
    blob = store.sample()
    if redis and blob is None and (files := FileStore(directory, key).sample()) is not None:
        old = _key_of(files, [(key, where), *server_keys(config)], str(directory))
        entries = FileStore(directory, old).load()
        count, _ = _to_redis(
            settings.redis_url, name, lambda: {**entries, **store.load()}, key, keep=False
        )
        kept = directory.with_name(f".{directory.name}.moved-to-redis-{_stamp()}")
        os.rename(directory, kept)
        return (
            f"moved {count} entries of tenant {tenant}'s vault from {directory} to "
            f"{store_name(store)}, under its own key ({where}); its tokens still resolve. "
            f"The files are kept in {kept}: remove them once the tenant works"
        )
    if blob is None:
        return f"tenant {tenant}'s vault ({store_name(store)}) is empty: it gets its own key"
    if opens(key, blob):
        return f"tenant {tenant}'s vault ({store_name(store)}) already uses its own key"
    old = _key_of(blob, server_keys(config), store_name(store))
    if redis:
        old_store = RedisStore(settings.redis_url, name, old)
        count, moved = _to_redis(settings.redis_url, name, old_store.load, key, keep=True)
    else:
        count, moved = _rekey_files(directory, old, key)
    return (
        f"rekeyed {count} entries of tenant {tenant}'s vault ({store_name(store)}) to its "
        f"own key ({where}); its tokens still resolve. The old vault is kept in {moved}: "
        "remove it once the tenant works"
    )


def _key_of(blob: bytes, keys: list[tuple[bytes, str]], where: str) -> bytes:
    found = opener(blob, keys)
    if found is None:
        tried = ", ".join(w for _, w in keys) or "no key"
        raise ConfigError(
            f"the vault in {where} was written with none of the keys tried ({tried}): "
            "nothing was changed"
        )
    return found[0]


def _rekey_files(directory: Path, old_key: bytes, key: bytes) -> tuple[int, str]:
    entries = FileStore(directory, old_key).load()
    fresh = directory.with_name(f".{directory.name}.rekey-{secrets.token_hex(4)}")
    FileStore(fresh, key).append(entries)
    fresh.mkdir(mode=0o700, exist_ok=True)
    _exchange(fresh, directory)  # ``fresh`` now holds the old segments
    kept = directory.with_name(f".{directory.name}.before-rekey-{_stamp()}")
    os.rename(fresh, kept)
    # A writer that added a segment after the load above (the server was not stopped):
    # its entries are carried over too, never left behind in the old vault.
    late = {t: e for t, e in FileStore(kept, old_key).load().items() if t not in entries}
    FileStore(directory, key).append(late)
    return len(entries) + len(late), str(kept)


def _to_redis(
    url: str, name: str, collect: Callable[[], Mapping[str, Entry]], key: bytes, *, keep: bool
) -> tuple[int, str]:
    """Write ``collect()`` under ``key`` beside ``name`` and rename it over ``name`` in one
    ``MULTI`` (``keep``: ``name`` is renamed aside first, to keep the old vault), under
    ``WATCH``: a writer that changed the vault meanwhile makes it collect again."""
    import redis

    from codemode.errors import StorageUnavailable

    client = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=10)
    fresh = f"{name}:rekey-{secrets.token_hex(4)}"
    aside = f"{name}:before-rekey-{_stamp()}"
    try:
        collect()  # drops expired fields first: not a change for the WATCH below
        for _ in range(20):
            with client.pipeline() as pipe:
                pipe.watch(name)  # type: ignore[no-untyped-call]
                entries = collect()
                if not entries:  # every entry expired meanwhile: its own key from now on
                    return 0, "nowhere (nothing was left to keep)"
                client.delete(fresh)
                RedisStore(url, fresh, key).append(entries)
                pipe.multi()
                if keep:
                    pipe.rename(name, aside)
                pipe.rename(fresh, name)
                try:
                    pipe.execute()
                except redis.WatchError:
                    continue  # a writer changed the vault meanwhile: again, with its entries
                return len(entries), f"redis {aside}"
        raise ConfigError(f"redis {name}: the vault kept changing; stop the server and retry")
    except redis.RedisError as exc:
        raise StorageUnavailable(f"privacy vault in redis {name}: {exc}") from exc
    finally:
        client.delete(fresh)
        client.close()


def _exchange(a: Path, b: Path) -> None:
    """Swap two directories at once (Linux ``renameat2``); elsewhere two renames."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    swap = getattr(libc, "renameat2", None)
    if swap is not None:
        if swap(_AT_FDCWD, bytes(a), _AT_FDCWD, bytes(b), _RENAME_EXCHANGE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS):
            raise OSError(err, os.strerror(err), str(b))
    aside = b.with_name(f".{b.name}.swap-{secrets.token_hex(4)}")
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
