"""The vault: token <-> real value, on the host only, encrypted at rest, with a TTL.

Where it lives (``scope``):

- ``workspace`` (default): one vault per workspace and tenant, shared by every session
  of it, in ``<workspace>/privacy/vault/`` (next to ``files/``, never inside it: the
  sandbox sees only ``files/``). So a token an agent saved in an artifact or state
  resolves in a later session. Sessions of one workspace are one tenant's: they share
  the vault by design.
- ``session``: in memory, per session; tokens die with the process.

The persisted vault is a directory of segments, each a Fernet token (AES-128-CBC +
HMAC-SHA256, ``cryptography``) holding the entries one flush added (``*.seg2``: the
entries grouped by expiry, tokens and values in one flat list, a third of the encoding
time of ``*.seg``'s ``[token, value, expires]`` rows, which are still read). Writers never
rewrite another's segment (temp file + rename of a new one), so processes sharing a
workspace need no lock; a reader picks up new segments when it meets a token it does
not know; many segments are merged into one from time to time.

The key (``codemode.privacy.keys.load_key``): ``CODEMODE_PRIVACY_KEY``, else
``vault.key_file``, else a key file created on first use under
``~/.config/codemode/privacy/`` (mode 0600), outside the workspace: a copy of the
workspace, a backup of it, or an MCP server given the workspace's directory does not
carry the key. The same key also seeds the token
ids (``codemode.privacy.tokens``), so a token cannot be forged without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import chain, repeat
from operator import attrgetter, getitem, itemgetter
from pathlib import Path
from typing import Any, NamedTuple, Protocol, cast

from codemode.errors import ConfigError

from .config import KEY_ENV
from .keys import default_key_path, load_key, new_key
from .tokens import ID_LENGTH, TokenMaker

__all__ = [
    "Entry",
    "FileStore",
    "MemoryStore",
    "RedisStore",
    "Vault",
    "VaultStore",
    "default_key_path",
    "load_key",
    "new_key",
]

log = logging.getLogger(__name__)

SEGMENT = ".seg2"
"""The name ending of the segments written now (``_groups``)."""
COMPACT_AFTER = 64
"""Segments in a vault directory before they are merged into one."""
PURGE_EVERY = 3600.0
"""Seconds between two purges of expired entries (or the vault's TTL, when shorter)."""


class Entry(NamedTuple):
    """A value and when its token expires (a tuple: the thousands a large result issues
    are made in C, ``_new_entries``)."""

    value: str
    expires: float


_value, _expires = attrgetter("value"), attrgetter("expires")
_ENTITY = slice(1, -(ID_LENGTH + 2))
"""A token's entity type: ``[EMAIL_k7d2m9x4qp]`` -> ``EMAIL``."""


def _new_entries(values: Iterable[str], expires: float) -> Iterator[Entry]:
    """``Entry(value, expires)`` of each value, without a Python call per entry."""
    return map(tuple.__new__, repeat(Entry), zip(values, repeat(expires)))


class VaultStore(Protocol):
    """Where a vault's entries are kept."""

    def load(self) -> dict[str, Entry]:
        """Every entry stored (expired ones included)."""
        ...

    def refresh(self) -> dict[str, Entry]:
        """Entries others stored since the last ``load``/``refresh``."""
        ...

    def append(self, entries: Mapping[str, Entry]) -> None: ...

    def get(self, token: str) -> Entry | None:
        """One entry straight from the store (a token another process issued)."""
        ...


class MemoryStore:
    """Nothing persisted: the vault lives as long as the process."""

    def load(self) -> dict[str, Entry]:
        return {}

    def refresh(self) -> dict[str, Entry]:
        return {}

    def append(self, entries: Mapping[str, Entry]) -> None:
        return None

    def get(self, token: str) -> Entry | None:
        return None


class FileStore:
    """Encrypted segments in a directory (see the module doc)."""

    def __init__(self, directory: Path, key: bytes) -> None:
        from cryptography.fernet import Fernet

        self.directory = directory
        self._fernet = Fernet(key)
        self._seen: set[str] = set()

    def _segments(self) -> list[str]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        # ``.seg2`` (written now) and ``.seg`` (written before): an older codemode sharing
        # the directory lists only ``.seg``, so its compaction never deletes what it
        # cannot read.
        return sorted(n for n in names if n.endswith((SEGMENT, ".seg")))

    def _read(self, name: str) -> dict[str, Entry]:
        from cryptography.fernet import InvalidToken

        try:
            blob = (self.directory / name).read_bytes()
        except FileNotFoundError:  # merged away by another process meanwhile
            return {}
        try:
            return _decode_segment(json.loads(self._fernet.decrypt(blob)))
        except InvalidToken:
            raise ConfigError(
                f"{self.directory / name}: the privacy vault was written with another key. "
                f"Set {KEY_ENV} (or privacy.vault.key_file) to the key it was written with; "
                "or move the vault directory away to start a new one (its tokens will no "
                "longer resolve)."
            ) from None
        except (ValueError, TypeError, KeyError) as exc:
            raise ConfigError(f"{self.directory / name}: unreadable vault segment: {exc}") from None

    def load(self) -> dict[str, Entry]:
        self._seen.clear()
        out = self.refresh()
        if len(self._seen) > COMPACT_AFTER:
            self._compact(out)
        return out

    def refresh(self) -> dict[str, Entry]:
        out: dict[str, Entry] = {}
        for name in self._segments():
            if name not in self._seen:
                self._seen.add(name)
                _merge(out, self._read(name))
        return out

    def append(self, entries: Mapping[str, Entry]) -> None:
        if entries:
            self._seen.add(self._write(entries))

    def get(self, token: str) -> Entry | None:
        return self.refresh().get(token)

    def sample(self) -> bytes | None:
        """The oldest segment as stored (encrypted), to tell which key wrote the vault."""
        for name in self._segments():
            with contextlib.suppress(FileNotFoundError):
                return (self.directory / name).read_bytes()
        return None

    def _write(self, entries: Mapping[str, Entry]) -> str:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        doc = {"v": 2, "groups": _groups(entries)}
        blob = self._fernet.encrypt(json.dumps(doc, ensure_ascii=False).encode())
        name = f"{time.time_ns():020d}-{os.getpid()}-{secrets.token_hex(4)}{SEGMENT}"
        tmp = self.directory / f".{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.directory / name)
        return name

    def _compact(self, entries: dict[str, Entry]) -> None:
        """Merge every segment read into one, dropping expired entries."""
        now = time.time()
        live = {t: e for t, e in entries.items() if e.expires > now}
        merged = self._write(live)
        for name in self._seen - {merged}:
            with contextlib.suppress(FileNotFoundError):
                (self.directory / name).unlink()
        self._seen = {merged}


class RedisStore:
    """One Redis hash per vault (``<prefix>:privacy:<tenant>:vault``), each entry its own
    Fernet token: the vault of a workspace whose storage is Redis, shared by every
    machine that serves it (they need the same key: ``CODEMODE_PRIVACY_KEY``)."""

    def __init__(self, url: str, name: str, key: bytes) -> None:
        import redis
        from cryptography.fernet import Fernet

        self._redis = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=10)
        self.name = name
        self._fernet = Fernet(key)

    def _decode(self, token: str, blob: bytes) -> Entry | None:
        from cryptography.fernet import InvalidToken

        try:
            value, expires = json.loads(self._fernet.decrypt(blob))
        except InvalidToken:
            raise ConfigError(
                f"redis {self.name}: the privacy vault was written with another key; set "
                f"{KEY_ENV} to the key every machine of this workspace uses"
            ) from None
        except ValueError:
            return None
        return Entry(str(value), float(expires))

    def _call(self, fn: Callable[[], object]) -> object:
        import redis

        try:
            return fn()
        except redis.RedisError as exc:
            from codemode.errors import StorageUnavailable

            raise StorageUnavailable(f"privacy vault in redis {self.name}: {exc}") from exc

    def load(self) -> dict[str, Entry]:
        raw = self._call(lambda: self._redis.hgetall(self.name))
        out: dict[str, Entry] = {}
        dead: list[bytes] = []
        now = time.time()
        for field, blob in dict(raw).items():  # type: ignore[call-overload]
            entry = self._decode(field.decode(), blob)
            if entry is None or entry.expires <= now:
                dead.append(field)
            else:
                out[field.decode()] = entry
        if dead:
            self._call(lambda: self._redis.hdel(self.name, *dead))
        return out

    def refresh(self) -> dict[str, Entry]:
        return {}  # looked up one by one (``get``): a Redis vault may be large

    def get(self, token: str) -> Entry | None:
        blob = self._call(lambda: self._redis.hget(self.name, token))
        return self._decode(token, blob) if isinstance(blob, bytes) else None

    def sample(self) -> bytes | None:
        """One entry as stored (encrypted), to tell which key wrote the vault."""
        cursor = 0

        def scan() -> object:
            return self._redis.hscan(self.name, cursor)

        for _ in range(64):  # HSCAN may return nothing for a while
            cursor, found = cast(tuple[int, dict[bytes, bytes]], self._call(scan))
            for blob in found.values():
                return bytes(blob)
            if not cursor:
                break
        return None

    def append(self, entries: Mapping[str, Entry]) -> None:
        if entries:
            mapping: dict[Any, Any] = {
                t: self._fernet.encrypt(json.dumps([e.value, e.expires]).encode())
                for t, e in entries.items()
            }
            self._call(lambda: self._redis.hset(self.name, mapping=mapping))


def _groups(entries: Mapping[str, Entry]) -> list[tuple[float, list[str]]]:
    """``[(expires, [token, value, token, value, ...]), ...]``: the tens of thousands of
    entries of a large result share one expiry, so the common case is one group made in
    C passes (the writer thread shares the GIL with the host; a float per entry was half
    of ``json.dumps``' time)."""
    expiries = set(map(_expires, entries.values()))
    if len(expiries) == 1:
        flat = list(chain.from_iterable(zip(entries, map(_value, entries.values()), strict=True)))
        return [(expiries.pop(), flat)]
    groups: dict[float, list[str]] = {}
    for token, entry in entries.items():
        groups.setdefault(entry.expires, []).extend((token, entry.value))
    return list(groups.items())


def _decode_segment(doc: Any) -> dict[str, Entry]:
    """A segment's entries: ``v`` 2 (``_groups``) or 1 (``[token, value, expires]`` rows)."""
    if doc.get("v") == 1:
        return {t: Entry(v, float(e)) for t, v, e in doc.get("entries", ())}
    out: dict[str, Entry] = {}
    for expires, flat in doc["groups"]:
        if len(flat) % 2:
            raise ValueError("a group of entries with a token and no value")
        out.update(zip(flat[::2], _new_entries(flat[1::2], float(expires)), strict=True))
    return out


def _merge(into: dict[str, Entry], more: Mapping[str, Entry]) -> None:
    for token, entry in more.items():
        have = into.get(token)
        if have is None or entry.expires > have.expires:
            into[token] = entry


class Vault:
    """Issues tokens for values and resolves them, for one scope."""

    def __init__(
        self,
        key: bytes,
        store: VaultStore | None = None,
        *,
        ttl: float = 30 * 86400,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._id_key = hmac.new(key, b"codemode privacy token ids", hashlib.sha256).digest()
        self._ids = TokenMaker(self._id_key)
        self.store: VaultStore = store if store is not None else MemoryStore()
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._entries = self.store.load()
        self._by_value: dict[str, str] = {}
        """value -> its token, for every live entry known here: a held value found again
        where no detector recognises it (``known.KnownValues``) gets the same token."""
        self.held_generation = 0
        """Bumped by each ``purge`` that took values out of ``_by_value``."""
        self._note(self._entries)
        self._pending: dict[str, Entry] = {}
        self._writer: threading.Thread | None = None
        self._last_refresh = 0.0
        self.purge_every = min(ttl, PURGE_EVERY)
        self._next_purge = clock() + self.purge_every

    def __len__(self) -> int:
        return len(self._entries)

    def token(self, entity: str, value: str) -> str:
        """The token for ``value`` (the same one every time, until it expires)."""
        return self.token_many([(entity, value)])[0]

    def token_many(self, items: Iterable[tuple[str, str]]) -> list[str]:
        """The token of each ``(entity, value)``: one lock and one clock reading for the
        thousands of values of a large result.

        A value tokenized before (this result's other rows, an earlier call, another
        session of the vault) is found in ``held()`` (value -> token) when that token
        names the same entity type: no keyed hash again; the vault's entry is still
        checked, so an expired or purged one is renewed as before. (No second dict keyed
        by ``(entity, value)``: each of its inserts into a dict of 100,000s of entries
        cost as much as the keyed hash it saved.)
        """
        items = items if isinstance(items, list) else list(items)
        now = self._clock()
        fresh = now + self.ttl
        renew = now + self.ttl / 2
        ids = self._ids
        entries, pending, by_value = self._entries, self._pending, self._by_value
        out: list[str] = []
        add = out.append
        with self._lock:
            firsts: Iterable[str | None] = repeat(None)
            values = list(map(itemgetter(1), items))
            known = list(map(by_value.get, values))
            missing = known.count(None)
            if items and not missing:
                # Values all seen before (the same rows again, held values found again):
                # each entry checked as the loop below does, in C passes.
                tokens = cast(list[str], known)
                got = list(map(entries.get, tokens))
                if None not in got and list(map(getitem, tokens, repeat(_ENTITY))) == list(
                    map(itemgetter(0), items)
                ):
                    live = cast(list[Entry], got)
                    if min(map(_expires, live)) >= renew and list(map(_value, live)) == values:
                        return tokens
            elif items and missing == len(items):
                # Values new to the vault (a result seen for the first time): their keyed
                # hashes in one batch, and when none is in the vault and no two share a
                # token (the common case), the entries stored with no loop per value.
                tokens = ids.tokens(items)
                new = dict(zip(tokens, _new_entries(values, fresh), strict=True))
                # (``isdisjoint`` reads the hashes ``new`` stored: a third of the time of a
                # lookup per token through ``__contains__``)
                if len(new) == len(tokens) and entries.keys().isdisjoint(new):
                    entries.update(new)
                    if pending:
                        pending.update(new)
                    else:
                        self._pending = new
                    by_value.update(zip(values, tokens, strict=True))
                    return tokens
                firsts = tokens
            for item, first in zip(items, firsts, strict=False):  # firsts may repeat None
                entity, value = item
                token = by_value.get(value)
                if token is not None and token[_ENTITY] == entity:
                    entry = entries.get(token)
                    if entry is not None and entry.expires >= renew and entry.value == value:
                        add(token)  # the common case of a value seen before
                        continue
                token = first if first is not None else ids.token(entity, value)
                entry = entries.get(token)
                if entry is not None and entry.value != value:
                    for salt in range(1, 8):
                        token = ids.token(entity, value, salt)
                        entry = entries.get(token)
                        if entry is None or entry.value == value:
                            break
                    else:  # pragma: no cover - eight 50-bit collisions in a row
                        raise RuntimeError("token id collisions: the vault is corrupt")
                if entry is None or entry.expires < renew:
                    entries[token] = self._pending[token] = Entry(value, fresh)
                    by_value[value] = token
                add(token)
        return out

    def value(self, token: str) -> str | None:
        """The real value of ``token``; None if this vault never issued it or it expired."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(token)
            if entry is None and now - self._last_refresh > 0.5:
                self._last_refresh = now
                more = self.store.refresh()
                _merge(self._entries, more)
                self._note(more)
                entry = self._entries.get(token)
            if entry is None:
                entry = self.store.get(token)
                if entry is not None:
                    self._entries[token] = entry
                    self._note({token: entry})
            if entry is None or entry.expires <= now:
                return None
            return entry.value

    def _note(self, entries: Mapping[str, Entry]) -> None:
        """Entries read from the store (other sessions of this vault) are held values too,
        while they live."""
        now = self._clock()
        for token, entry in entries.items():
            if entry.expires > now:
                self._by_value.setdefault(entry.value, token)

    def held(self) -> Mapping[str, str]:
        """{value: token} of every value this vault issued a token for (the live dict:
        read it, never change it; ``len`` of it tells that it grew, ``held_generation``
        that :meth:`purge` took values out of it)."""
        return self._by_value

    def flush(self) -> None:
        """Persist the tokens issued since the last flush (after a ``flush_soon`` under
        way, which it waits for; the error of one that failed is raised here)."""
        self.wait()
        with self._lock:
            pending, self._pending = self._pending, {}
        if pending:
            try:
                self.store.append(pending)
            except BaseException:
                with self._lock:
                    pending.update(self._pending)
                    self._pending = pending
                raise
        self.wait()  # a writer started meanwhile may hold some of them

    def flush_soon(self) -> None:
        """Persist the tokens issued so far in a background thread, off the caller's path.

        One writer at a time, looping until nothing is pending. Nothing is lost: entries
        it fails to write stay pending (the next ``flush`` writes them or raises), the
        thread is not a daemon (the interpreter waits for it at exit), and the tokens
        already resolve in this process from memory.
        """
        with self._lock:
            if not self._pending or self._writer is not None:
                return
            writer = self._writer = threading.Thread(
                target=self._write_behind, name="codemode-vault-flush"
            )
        writer.start()

    def wait(self) -> None:
        """Until the background writer of ``flush_soon`` (if any) is done."""
        while (writer := self._writer) is not None and writer is not threading.current_thread():
            writer.join()
            with self._lock:
                if self._writer is writer:  # it died without saying so: not waited for again
                    self._writer = None

    def _write_behind(self) -> None:
        while True:
            with self._lock:
                pending, self._pending = self._pending, {}
                if not pending:
                    self._writer = None
                    return
            try:
                self.store.append(pending)
            except Exception as exc:  # noqa: BLE001 - kept pending; flush() raises it
                with self._lock:
                    pending.update(self._pending)
                    self._pending = pending
                    self._writer = None
                log.warning("privacy vault: %d tokens not persisted yet: %s", len(pending), exc)
                return

    def purge_due(self) -> int:
        """``purge``, when ``purge_every`` seconds passed since the last one: the engine
        asks before it looks for held values, so an expired value is no longer found (and
        given a fresh token) more than ``purge_every`` after it expired."""
        now = self._clock()
        if now < self._next_purge:
            return 0
        self._next_purge = now + self.purge_every
        return self.purge()

    def purge(self) -> int:
        """Forget expired entries (in memory); the next compaction drops them on disk."""
        now = self._clock()
        with self._lock:
            dead = {
                t: self._entries.pop(t) for t, e in list(self._entries.items()) if e.expires <= now
            }
            if dead:
                # In place, one value at a time: readers in other threads hold this dict
                # (``held``) and must never see it without the values that still live (a
                # ``clear`` then ``update`` showed it empty in between: nothing was held).
                live = {e.value: t for t, e in reversed(self._entries.items())}
                by_value = self._by_value
                for value in {e.value for e in dead.values()}:
                    if by_value.get(value) in dead:
                        if value in live:
                            by_value[value] = live[value]
                        else:
                            by_value.pop(value, None)
                self.held_generation += 1
        return len(dead)

    def tokens(self) -> Iterable[str]:
        with self._lock:
            return list(self._entries)
