"""Bounds on the HTTP connections themselves, before any request reaches the app.

uvicorn waits for a request's head for as long as the client keeps the connection open
and accepts every connection it is offered, so one client without a token could hold
thousands of sockets by sending a header line now and then (slowloris) until the process
runs out of file descriptors: then no client connects, no worker starts (pipes), no
record is written. Auth cannot help: it runs once the head is complete. So the protocol
itself enforces, per process:

- a head deadline: a request's line and headers must arrive within ``header_timeout``
  seconds of the connection opening or of the previous answer ending (a request being
  served, an event stream, is never cut);
- a cap on open connections (``max_connections``, by default half the process's open-file
  limit): at the cap, a new connection takes the place of the one that has waited longest
  without sending a request (refused only when every connection is busy with one);
- a cap per client address (``max_per_client``, half the total), so that one address
  cannot take them all: at it, a new connection from that address takes the place of the
  one of that address that has waited longest without sending a request (closed at once
  only when every one is busy with a request). Refusing it instead let one local process
  holding idle sockets shut out every other client on loopback, ``/healthz`` included.

Settings: ``CODEMODE_HTTP_HEADER_TIMEOUT``, ``CODEMODE_HTTP_MAX_CONNECTIONS``,
``CODEMODE_HTTP_MAX_PER_CLIENT``, and ``CODEMODE_HTTP_MAX_MCP_SESSIONS`` for the SDK's MCP
session ids (``http.mcp_sessions_cap``) (docs/server.md, "HTTP").
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from codemode.errors import ConfigError

from .forwarded import TrustedProxies

log = logging.getLogger(__name__)

DEFAULT_HEADER_TIMEOUT = 10.0
HEADER_TIMEOUT_ENV = "CODEMODE_HTTP_HEADER_TIMEOUT"
MAX_CONNECTIONS_ENV = "CODEMODE_HTTP_MAX_CONNECTIONS"
MAX_PER_CLIENT_ENV = "CODEMODE_HTTP_MAX_PER_CLIENT"
MAX_MCP_SESSIONS_ENV = "CODEMODE_HTTP_MAX_MCP_SESSIONS"


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout: float
    max_connections: int
    max_per_client: int

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ConnectionLimits:
        """The limits for this process: the environment's, else the defaults."""
        env = os.environ if env is None else env
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        fds = soft if soft != resource.RLIM_INFINITY else 65536
        total = env_number(env, MAX_CONNECTIONS_ENV, int, max(32, fds // 2))
        per_client = env_number(env, MAX_PER_CLIENT_ENV, int, max(16, total // 2))
        timeout = env_number(env, HEADER_TIMEOUT_ENV, float, DEFAULT_HEADER_TIMEOUT)
        return cls(timeout, total, min(per_client, total))


def env_number(env: Mapping[str, str], name: str, kind: type[Any], default: Any) -> Any:
    """``env[name]`` as a positive ``kind``, ``default`` when unset; ConfigError else."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = 0
    if not value > 0:
        raise ConfigError(f"{name} must be a positive number, not {raw!r}")
    return value


def guarded_protocol(
    limits: ConnectionLimits, proxies: TrustedProxies | None = None
) -> type[H11Protocol]:
    """uvicorn's h11 protocol with ``limits`` applied (one class per server); trusted
    ``proxies`` carry many clients and are not held to ``max_per_client``."""
    open_by_client: Counter[str] = Counter()
    waiting: dict[Any, None] = {}  # connections without a request in progress, oldest first
    opened = 0
    refused = 0

    def refuse(peer: str) -> None:
        nonlocal refused
        refused += 1
        if refused in (1, 10, 100) or refused % 1000 == 0:
            log.warning(
                "refused %d HTTP connections so far: at the limit of %d open connections "
                "(all busy with requests), or %d from one address (%s)",
                refused,
                limits.max_connections,
                limits.max_per_client,
                peer,
            )

    def _make_room(idle: Guarded | None, peer: str, transport: asyncio.Transport) -> bool:
        """Close ``idle`` (a connection with no request in progress) for a newcomer from
        ``peer``; with none to close, the newcomer is refused (False)."""
        if idle is None:
            refuse(peer)
            transport.abort()
            return False
        idle.release()
        idle.transport.abort()
        return True

    class Guarded(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        peer_address: str | None = None  # the address counted for it (None: not counted)

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            nonlocal opened
            super().connection_made(transport)
            peer = self.client[0] if self.client else ""
            if open_by_client[peer] >= limits.max_per_client and not (
                proxies and proxies.trusts(peer)
            ):
                # Room is made from this address's connection that has waited longest
                # without a request: idle sockets held by one process on an address
                # (on loopback: every local client's) cannot keep the others out.
                own = next((c for c in waiting if c.peer_address == peer), None)
                if not _make_room(own, peer, transport):
                    return
            # At the total limit, room is made from the connection that has waited longest
            # without sending a request: many addresses holding idle sockets cannot keep
            # others out.
            if opened >= limits.max_connections and not _make_room(
                next(iter(waiting), None), peer, transport
            ):
                return
            self.peer_address = peer
            open_by_client[peer] += 1
            opened += 1
            self._arm()

        def release(self) -> None:
            nonlocal opened
            waiting.pop(self, None)
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            if self.peer_address is not None:
                opened -= 1
                open_by_client[self.peer_address] -= 1
                if open_by_client[self.peer_address] <= 0:
                    del open_by_client[self.peer_address]
                self.peer_address = None

        def connection_lost(self, exc: Exception | None) -> None:
            self.release()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._busy():
                waiting.pop(self, None)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if (
                self.peer_address is not None
                and not self.transport.is_closing()
                and not self._busy()
            ):
                self._arm()  # the next request's head has its own deadline

        def _busy(self) -> bool:
            """A request is in progress (its head arrived; it is not answered yet)."""
            return self.cycle is not None and not self.cycle.response_complete

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(limits.header_timeout, self._expired)
            waiting.pop(self, None)
            waiting[self] = None

        def _expired(self) -> None:
            self._deadline = None
            if not self._busy():  # still waiting for a head
                self.release()
                self.transport.abort()

    return Guarded


__all__ = [
    "DEFAULT_HEADER_TIMEOUT",
    "MAX_MCP_SESSIONS_ENV",
    "ConnectionLimits",
    "env_number",
    "guarded_protocol",
]
