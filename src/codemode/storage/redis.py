"""``RedisStorage``: records in Redis, shared by many agents on many machines.

Keys (``P`` is the tenant prefix, so prefixes isolate tenants)::

    P:<kind>:meta   hash  name -> {"size", "crc", "meta"}   (listed without the data)
    P:<kind>:blobs  hash  name -> key of the value's blob
    P:<kind>:gen    int   bumped by every write and delete
    P:blob:<uuid>   string, the value (appended chunk by chunk for big values)
    P:lock:<kind>:<name>   lock token with a lease

A write fills a fresh blob key that expires on its own, then one Lua script checks the
blob's length and switches ``meta``/``blobs`` to it atomically. A dropped connection or a
dead writer therefore leaves the old record untouched (the orphan blob expires). The
replaced blob is kept for a grace period so readers streaming it finish consistently.
Connection failures are reported as ``StorageUnavailable``.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
import zlib
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigError, CorruptRecord, NotFound, StorageUnavailable, ValidationError
from .base import (
    CHUNK,
    BadRecord,
    Data,
    Listing,
    RecordInfo,
    check_kind,
    check_name,
    encode_meta,
    iter_chunks,
    name_problem,
    shell_word,
    shown,
)

try:
    import redis.asyncio as aioredis
    from redis import exceptions as rexc
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialBackoff
except ImportError:  # the optional 'redis' extra: RedisStorage() says how to install it
    HAVE_REDIS = False
else:
    HAVE_REDIS = True

EXTRA_HINT = "RedisStorage needs the Redis client: pip install 'codemode[redis]'"

PENDING_TTL = 3600
GRACE_TTL = 60

_COMMIT = """
if ARGV[5] then redis.call('SET', KEYS[4], ARGV[5]) end
local n = redis.call('STRLEN', KEYS[4])
if n ~= tonumber(ARGV[3]) then
  return redis.error_reply('CMSIZE blob has ' .. n .. ' bytes, expected ' .. ARGV[3])
end
local old = redis.call('HGET', KEYS[2], ARGV[1])
if old and old ~= KEYS[4] then redis.call('EXPIRE', old, tonumber(ARGV[4])) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], KEYS[4])
redis.call('PERSIST', KEYS[4])
return redis.call('INCR', KEYS[3])
"""

_DELETE = """
local old = redis.call('HGET', KEYS[2], ARGV[1])
local n = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if old then redis.call('EXPIRE', old, tonumber(ARGV[2])) end
if n > 0 then redis.call('INCR', KEYS[3]) end
return n
"""

_READ = """
local e = redis.call('HGET', KEYS[1], ARGV[1])
if not e then return false end
local b = redis.call('HGET', KEYS[2], ARGV[1])
if not b then return {e, false, false} end
if redis.call('STRLEN', b) <= tonumber(ARGV[2]) then
  return {e, b, redis.call('GET', b) or ''}
end
return {e, b, false}
"""

_UNLOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        host = parts.hostname or ""
        netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


class RedisStorage:
    """Records in Redis under ``prefix`` (one prefix per tenant or agent team)."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        prefix: str = "codemode",
        *,
        connect_timeout: float = 2.0,
        socket_timeout: float = 10.0,
    ) -> None:
        if not HAVE_REDIS:
            raise ConfigError(EXTRA_HINT)
        if not prefix or any(c.isspace() for c in prefix) or len(prefix) > 100:
            raise ValidationError(f"invalid Redis key prefix {prefix!r}")
        self.url = url
        self.prefix = prefix
        self._kwargs: dict[str, Any] = {
            "socket_connect_timeout": connect_timeout,
            "socket_timeout": socket_timeout,
            "retry": Retry(ExponentialBackoff(cap=0.2, base=0.01), retries=2),
        }
        self._client: aioredis.Redis | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"RedisStorage({_redact(self.url)!r}, prefix={self.prefix!r})"

    def describe(self) -> str:
        return f"redis {_redact(self.url)} prefix {self.prefix!r}"

    # -- plumbing ----------------------------------------------------------------------
    def _r(self) -> aioredis.Redis:
        """One client per event loop: redis.asyncio connections belong to the loop."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = aioredis.Redis.from_url(self.url, **self._kwargs)
            self._loop = loop
        return self._client

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except (rexc.ConnectionError, rexc.TimeoutError, OSError) as exc:
            raise StorageUnavailable(
                f"{self.describe()} is unreachable while trying to {what}; nothing was "
                f"written ({exc})"
            ) from None
        except rexc.ResponseError as exc:
            raise StorageUnavailable(
                f"{self.describe()} refused to {what}; nothing was written ({exc})"
            ) from None

    def _k(self, kind: str, what: str) -> str:
        return f"{self.prefix}:{check_kind(kind)}:{what}"

    async def _eval(self, script: str, keys: list[str], args: list[Any]) -> Any:
        return await self._r().eval(script, len(keys), *keys, *args)

    def _entry(self, kind: str, name: str, raw: bytes | str, where: str) -> tuple[RecordInfo, int]:
        try:
            entry = json.loads(raw)
            info = RecordInfo(kind, name, int(entry["size"]), dict(entry["meta"]))
            return info, int(entry["crc"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptRecord(f"{where}[{name}]: unreadable record entry ({exc})") from None

    # -- writing -----------------------------------------------------------------------
    async def put(
        self, kind: str, name: str, data: Data, meta: Mapping[str, Any] | None = None
    ) -> RecordInfo:
        check_name(name)
        meta_raw = encode_meta(meta)
        keys = [self._k(kind, "meta"), self._k(kind, "blobs"), self._k(kind, "gen")]
        blob = f"{self.prefix}:blob:{uuid.uuid4().hex}"
        r = self._r()
        size = 0
        crc = 0
        with self._errors(f"write {kind}/{name}"):
            if isinstance(data, bytes | bytearray | memoryview) and len(data) <= CHUNK:
                payload = bytes(data)
                size, crc = len(payload), zlib.crc32(payload)
                entry = self._entry_json(size, crc, meta_raw)
                await self._eval(_COMMIT, [*keys, blob], [name, entry, size, GRACE_TTL, payload])
            else:
                try:
                    async for chunk in iter_chunks(data):
                        crc = zlib.crc32(chunk, crc)
                        if size == 0:
                            await r.set(blob, bytes(chunk), ex=PENDING_TTL)
                        else:
                            await r.append(blob, bytes(chunk))
                        size += len(chunk)
                    entry = self._entry_json(size, crc, meta_raw)
                    await self._eval(_COMMIT, [*keys, blob], [name, entry, size, GRACE_TTL])
                except BaseException:
                    await self._forget(blob)
                    raise
        return RecordInfo(kind, name, size, json.loads(meta_raw))

    @staticmethod
    def _entry_json(size: int, crc: int, meta_raw: bytes) -> bytes:
        return b'{"size":%d,"crc":%d,"meta":%s}' % (size, crc, meta_raw)

    async def _forget(self, blob: str) -> None:
        """Best effort: drop an unfinished blob now (it expires anyway)."""
        with suppress(rexc.RedisError, OSError, TimeoutError):
            await asyncio.wait_for(self._r().unlink(blob), 1.0)

    async def delete(self, kind: str, name: str) -> bool:
        check_name(name)
        keys = [self._k(kind, "meta"), self._k(kind, "blobs"), self._k(kind, "gen")]
        with self._errors(f"delete {kind}/{name}"):
            return bool(await self._eval(_DELETE, keys, [name, GRACE_TTL]))

    # -- reading -----------------------------------------------------------------------
    async def info(self, kind: str, name: str) -> RecordInfo:
        check_name(name)
        key = self._k(kind, "meta")
        with self._errors(f"read {kind}/{name}"):
            raw = await self._r().hget(key, name)
        if raw is None:
            raise NotFound(f"no {kind} record named {name!r}")
        return self._entry(kind, name, raw, key)[0]

    async def exists(self, kind: str, name: str) -> bool:
        check_name(name)
        with self._errors(f"read {kind}/{name}"):
            return bool(await self._r().hexists(self._k(kind, "meta"), name))

    async def _locate(
        self, kind: str, name: str, inline_limit: int
    ) -> tuple[RecordInfo, int, str, bytes | None]:
        check_name(name)
        keys = [self._k(kind, "meta"), self._k(kind, "blobs")]
        with self._errors(f"read {kind}/{name}"):
            found = await self._eval(_READ, keys, [name, inline_limit])
        if not found:
            raise NotFound(f"no {kind} record named {name!r}")
        info, crc = self._entry(kind, name, found[0], keys[0])
        if not found[1]:
            raise CorruptRecord(f"{keys[1]}[{name}]: the record has no value")
        blob = found[1].decode()
        return info, crc, blob, found[2] if found[2] is not False else None

    async def read(self, kind: str, name: str) -> tuple[RecordInfo, bytes]:
        info, crc, blob, data = await self._locate(kind, name, CHUNK)
        if data is None:
            buf = bytearray()
            async for chunk in self._chunks(info, crc, blob, CHUNK, check=False):
                buf += chunk
            data = bytes(buf)
            del buf
        self._verify(info, crc, blob, data)
        return info, data

    def _verify(self, info: RecordInfo, crc: int, blob: str, data: bytes) -> None:
        if len(data) != info.size or zlib.crc32(data) != crc:
            raise CorruptRecord(
                f"{blob}: value of {info.kind}/{info.name} does not match its checksum"
            )

    async def stream(
        self, kind: str, name: str, chunk_size: int = CHUNK
    ) -> tuple[RecordInfo, AsyncIterator[bytes]]:
        info, crc, blob, _ = await self._locate(kind, name, -1)
        return info, self._chunks(info, crc, blob, chunk_size, check=True)

    async def _chunks(
        self, info: RecordInfo, crc: int, blob: str, chunk_size: int, *, check: bool
    ) -> AsyncIterator[bytes]:
        r = self._r()
        pos = 0
        running = 0
        while pos < info.size:
            with self._errors(f"read {info.kind}/{info.name}"):
                chunk = cast(
                    bytes, await r.getrange(blob, pos, min(pos + chunk_size, info.size) - 1)
                )
            if not chunk:
                break
            pos += len(chunk)
            if check:
                running = zlib.crc32(chunk, running)
            yield chunk
        if pos != info.size or (check and running != crc):
            raise CorruptRecord(f"{blob}: value of {info.kind}/{info.name} is incomplete")

    async def list(self, kind: str, prefix: str = "") -> Listing:
        key = self._k(kind, "meta")
        with self._errors(f"list {kind}"):
            entries = cast(dict[bytes, bytes], await self._r().hgetall(key))
        out = Listing()
        for raw_name in sorted(entries):
            name = raw_name.decode(errors="surrogateescape")
            if not name.startswith(prefix):
                continue
            problem = name_problem(name)
            if problem is not None:
                field = shown(raw_name)
                out.bad.append(
                    BadRecord(
                        field,
                        f"{key}[{field}]",
                        f"{key}[{field}]: {problem}; skipped. Remove it with: redis-cli HDEL "
                        f"{shell_word(key)} {shell_word(raw_name)}",
                    )
                )
                continue
            try:
                out.records.append(self._entry(kind, name, entries[raw_name], key)[0])
            except CorruptRecord as exc:
                out.bad.append(BadRecord(name, f"{key}[{name}]", str(exc)))
        return out

    async def generation(self, kind: str) -> str:
        with self._errors(f"read {kind}"):
            gen = cast(bytes | None, await self._r().get(self._k(kind, "gen")))
        return gen.decode() if gen else "0"

    @asynccontextmanager
    async def lock(self, kind: str, name: str, timeout: float = 30.0) -> AsyncIterator[None]:
        key = f"{self.prefix}:lock:{check_kind(kind)}:{check_name(name)}"
        token = uuid.uuid4().hex
        lease_ms = int(max(timeout, 30.0) * 1000)
        deadline = time.monotonic() + timeout
        delay = 0.001
        r = self._r()
        while True:
            with self._errors(f"lock {kind}/{name}"):
                if await r.set(key, token, nx=True, px=lease_ms):
                    break
            if time.monotonic() > deadline:
                raise StorageUnavailable(
                    f"{key} stayed locked by another writer for {timeout:.0f}s"
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
        try:
            yield
        finally:
            with self._errors(f"unlock {kind}/{name}"):
                await self._eval(_UNLOCK, [key], [token])

    async def aclose(self) -> None:
        client, self._client, self._loop = self._client, None, None
        if client is not None:
            with suppress(RuntimeError):  # its event loop is gone, and its connections
                await client.aclose()
