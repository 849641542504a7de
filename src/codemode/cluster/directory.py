"""Where the sessions that several ``codemode serve`` replicas share are written down.

One Redis (the workspace's storage) holds, per session key, the name of the detached
Ray actor that keeps its interpreter, and per MCP session id the client's ``initialize``
parameters, so any replica can find a session another replica opened. Keys are hashes
of the session key (a session id is a bearer secret: it never appears in Redis as is).
Every record expires after ``ttl`` seconds without use; the actors end themselves after
the same idle time (``SessionActor.expire_after``).

Nothing here imports Ray or the MCP SDK.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError, StorageUnavailable

PREFIX = "codemode:replicas"

_CLAIM = """
local cur = redis.call('GET', KEYS[1])
if cur == false or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
  return ARGV[2]
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return cur
"""
"""Write a session's actor down unless another replica wrote one first (or replace the
record ``ARGV[1]`` known to be stale); answers the record that holds afterwards."""


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class SessionDirectory:
    """Session key -> actor name, MCP session id -> its client's handshake (Redis)."""

    def __init__(self, url: str, *, tenant: str = "default", ttl: float = 1800.0) -> None:
        try:
            import redis.asyncio as aioredis
        except ImportError as exc:
            raise ConfigError("shared sessions need Redis: pip install 'codemode[redis]'") from exc
        from redis.exceptions import RedisError

        self._r = aioredis.Redis.from_url(url)
        self._errors = RedisError
        parts = urlsplit(url)
        self.where = f"{parts.hostname or '?'}:{parts.port or 6379}"
        """Host and port only: the URL may hold a password."""
        self.ttl = max(int(ttl), 1)
        self._prefix = f"{PREFIX}:{tenant}"

    @contextmanager
    def _reaching(self) -> Iterator[None]:
        """Redis errors, translated once: who calls needs to know the directory is down."""
        try:
            yield
        except self._errors as exc:
            raise StorageUnavailable(
                f"the shared session directory (Redis at {self.where}) cannot be reached: "
                f"{exc}. Sessions shared between replicas need it; retry once it is back"
            ) from exc

    def _k(self, kind: str, key: str) -> str:
        return f"{self._prefix}:{kind}:{_digest(key)}"

    async def _get(self, kind: str, key: str) -> dict[str, Any] | None:
        with self._reaching():
            raw = await self._r.get(self._k(kind, key))
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(value, dict):
            return None
        with self._reaching():
            await self._r.expire(self._k(kind, key), self.ttl)  # used: kept as long again
        return value

    async def _set(self, kind: str, key: str, value: dict[str, Any]) -> None:
        with self._reaching():
            await self._r.set(self._k(kind, key), json.dumps(value), ex=self.ttl)

    # -- actors ------------------------------------------------------------------------
    async def actor(self, key: str) -> str | None:
        record = await self._get("actor", key)
        name = record.get("name") if record else None
        return name if isinstance(name, str) else None

    async def claim_actor(self, key: str, name: str, *, stale: str | None = None) -> str | None:
        """Record ``name`` as the session's actor unless another replica recorded one
        first (two replicas starting the same session at once): the name that holds.
        ``stale``: a recorded name found dead, which ``name`` may replace."""
        old = json.dumps({"name": stale}) if stale is not None else ""
        new = json.dumps({"name": name})
        with self._reaching():
            raw = await self._r.eval(_CLAIM, 1, self._k("actor", key), old, new, str(self.ttl))
        try:
            record = json.loads(raw)
        except ValueError:
            return None
        held = record.get("name") if isinstance(record, dict) else None
        return held if isinstance(held, str) else None

    async def forget(self, key: str) -> None:
        with self._reaching():
            await self._r.delete(self._k("actor", key))

    # -- MCP sessions ------------------------------------------------------------------
    async def mcp_session(self, sid: str) -> dict[str, Any] | None:
        """The handshake of an MCP session some replica issued, or None."""
        return await self._get("mcp", sid)

    async def add_mcp_session(self, sid: str, handshake: dict[str, Any]) -> None:
        await self._set("mcp", sid, handshake)

    async def forget_mcp_session(self, sid: str) -> None:
        with self._reaching():
            await self._r.delete(self._k("mcp", sid))

    async def aclose(self) -> None:
        await self._r.aclose()
