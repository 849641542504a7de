"""The source itself: listing and calling one server's tools over a shared connection.

One :class:`MCPSource` holds at most one live :class:`Connection` (made lazily, on the first
``list_tools``/``call_tool``) and shares it between every caller of the process; concurrent
calls are multiplexed by the SDK. A dead connection is replaced on the next call; a call
that was in flight when the server died fails with :class:`ServerUnavailable` (it may have
run, so it is not retried), while ``list_tools`` (read-only) is retried once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pydantic
from mcp import Client
from mcp.shared.exceptions import MCPError

from codemode.config import ServerConfig
from codemode.errors import ServerUnavailable, ToolError, ToolNotFound, ToolTimeout
from codemode.isolation.paths import touches_workspace
from codemode.isolation.servers import Isolation
from codemode.observability import carrier
from codemode.tools.sources.mcp.connection import Connection
from codemode.tools.sources.mcp.convert import call_result, tool_spec
from codemode.tools.sources.mcp.lenient import schema_warnings
from codemode.tools.sources.mcp.listing import ListingError, every_tool
from codemode.tools.sources.mcp.stderr import describe, with_tail
from codemode.tools.spec import ToolCallResult, ToolSpec

__all__ = ["RELIST_GAP", "MCPSource"]

log = logging.getLogger(__name__)

RELIST_GAP = 1.0
"""Seconds at least between the end of one listing and a re-listing that a server's
``notifications/tools/list_changed`` causes. A server sending them in a loop made every
call re-list its tools (twice: the registry and the output-schema check); now the
notices are coalesced: the listing is at most this stale, and it costs at most one
``tools/list`` per gap however many notices arrive."""
FLOOD_NOTICES = 100
"""Notices within one gap past which the server is named in a warning (once a connection)."""

_CLOSED = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


class MCPSource:
    """Tools of one upstream MCP server (stdio, streamable HTTP or SSE)."""

    # Results are already checked against the tool's outputSchema (by the SDK, made
    # lenient in ``lenient``); a mismatch arrives as an entry of ``ToolCallResult.warnings``.
    validates_output = True
    # Results come through a JSON parser that refuses lone surrogates (the SDK's), after
    # the stdio reader or the HTTP response hook (``surrogates``) showed each as U+FFFD and
    # said so in the warnings: the pipeline need not serialize every structured result
    # again to look for them.
    utf8_results = True

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        *,
        default_timeout: float = 60.0,
        connect_timeout: float = 30.0,
        protocol: str | None = None,
        isolation: Isolation | None = None,
    ) -> None:
        self._name = name
        self.config = config
        self.isolation = isolation or Isolation()
        self._retired: dict[Connection, asyncio.Task[None]] = {}
        self.default_timeout = config.timeout or default_timeout
        self.connect_timeout = config.connect_timeout or connect_timeout
        self.protocol = config.protocol or protocol or "auto"
        if self.protocol not in ("auto", "legacy", "modern"):
            raise ValueError(f"protocol must be auto, legacy or modern, not {self.protocol!r}")
        self._conn: Connection | None = None
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self._tools: list[ToolSpec] | None = None
        self._failure: ServerUnavailable | None = None  # the last start's error, if it failed
        self._starts_finished = 0
        self.connects = 0  # how many connections were made (observable reconnects)
        # Bumped whenever the tool listing may have changed (new connection, or the server
        # sent notifications/tools/list_changed, coalesced); the registry re-lists when it
        # moves.
        self._version = 0
        self._stale = False  # notified, not yet forgotten: at most RELIST_GAP after a listing
        self._listed_at = -RELIST_GAP
        self._notices: list[float] = []  # times of the notices of the current gap
        self._flood_told: Connection | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def protocol_version(self) -> str | None:
        """The protocol version negotiated by the live connection, if any."""
        conn = self._conn
        if conn is None or conn.client is None:
            return None
        return conn.client.protocol_version

    def __repr__(self) -> str:
        return f"MCPSource({self._name!r}, transport={self.config.transport!r})"

    @property
    def listing_version(self) -> int:
        """Moves when the listing must be asked for again (the registry compares it)."""
        if self._stale and time.monotonic() - self._listed_at >= RELIST_GAP:
            self._forget()
        return self._version

    def tools_changed(self, *, now: bool = False) -> None:
        """The server's tools may have changed: the listing is forgotten at once when
        ``now`` (a new connection), else at the first look :data:`RELIST_GAP` after the
        last listing (``notifications/tools/list_changed``, however many)."""
        if now:
            self._forget()
            return
        self._stale = True
        at = time.monotonic()
        self._notices = [t for t in self._notices if at - t < RELIST_GAP]
        self._notices.append(at)
        if len(self._notices) > FLOOD_NOTICES and self._flood_told is not self._conn:
            self._flood_told = self._conn
            log.warning(
                "MCP server %r sent more than %d notifications/tools/list_changed within "
                "%g s; codemode re-lists its tools at most once every %g s",
                self._name, FLOOD_NOTICES, RELIST_GAP, RELIST_GAP,
            )  # fmt: skip
        if len(self._notices) > FLOOD_NOTICES:
            del self._notices[: -FLOOD_NOTICES - 1]  # bounded, however long the flood

    def _forget(self) -> None:
        self._stale = False
        self._tools = None
        self._version += 1
        conn = self._conn
        if conn is not None:
            conn.output_schemas.clear()  # the results' check lists again, once

    # ------------------------------------------------------------------ connection

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            self._locks = {lp: lk for lp, lk in self._locks.items() if not lp.is_closed()}
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def _client(self) -> tuple[Connection, Client]:
        loop = asyncio.get_running_loop()
        conn = self._conn
        if conn is not None and not conn.dead and conn.client is not None and conn.loop is loop:
            return conn, conn.client
        finished_seen = self._starts_finished
        async with self._lock():
            conn = self._conn
            if conn is None or conn.dead or conn.client is None or conn.loop is not loop:
                failed = self._failure
                if failed is not None and self._starts_finished != finished_seen:
                    # Callers that queued behind a failed start share its verdict instead of
                    # each waiting out another start (N x connect_timeout for a hung server).
                    raise ServerUnavailable(failed.message, server=self._name)
                if conn is not None and conn.loop is loop:
                    await conn.stop()
                conn = Connection(self)
                self._conn = conn
                self.connects += 1
                try:
                    await conn.start()
                except ServerUnavailable as exc:
                    self._failure = exc
                    raise
                except BaseException:  # cancelled: no verdict for the callers queued behind
                    self._failure = None
                    raise
                else:
                    self._failure = None
                finally:
                    self._starts_finished += 1
                if self.connects > 1:
                    self.tools_changed(now=True)  # a restarted server may offer other tools
            assert conn.client is not None
            return conn, conn.client

    async def _drop(self, conn: Connection) -> None:
        if self._conn is conn:
            await conn.stop()

    async def _lost(self, conn: Connection, during: str, detail: str = "") -> ServerUnavailable:
        tail = await conn.settled_stderr(0.2)
        if detail == "Connection closed":  # the SDK's words for every end: nothing new
            detail = ""
        why = f": {conn.broken or detail}" if conn.broken or detail else ""
        return ServerUnavailable(
            with_tail(f"connection lost during {during}{why}; the next call reconnects", tail),
            server=self._name,
        )

    # ------------------------------------------------------------------ ToolSource

    async def list_tools(self, *, refresh: bool = False) -> list[ToolSpec]:
        """The server's tools after ``include``/``exclude``; cached until ``refresh``."""
        if self._tools is not None and not refresh:
            return list(self._tools)
        for attempt in (1, 2):
            conn, client = await self._client()
            try:
                specs = await asyncio.wait_for(self._list_all(client), self.connect_timeout)
            except MCPError as exc:
                if exc.code == mt.CONNECTION_CLOSED:
                    await self._drop(conn)
                    if attempt == 1:
                        continue  # read-only: safe to retry on a fresh connection
                    raise await self._lost(conn, "tools/list") from exc
                raise ToolError(f"tools/list failed: {exc.message}", server=self._name) from exc
            except TimeoutError:
                await self._drop(conn)
                raise ToolTimeout(
                    with_tail(
                        f"did not answer tools/list within {self.connect_timeout:g} s",
                        conn.stderr_text(),
                    ),
                    server=self._name,
                ) from None
            except (OSError, httpx2.HTTPError, pydantic.ValidationError) as exc:
                await self._drop(conn)
                raise ServerUnavailable(
                    f"tools/list failed: {describe(exc)}", server=self._name
                ) from exc
            self._tools = [s for s in specs if self.config.allows(s.name)]
            self._listed_at = time.monotonic()
            return list(self._tools)
        raise AssertionError("unreachable")

    async def _list_all(self, client: Client) -> list[ToolSpec]:
        try:
            tools = await every_tool(
                lambda cursor: client.list_tools(cursor=cursor),
                max_bytes=self.config.max_message_bytes,
            )
        except ListingError as exc:
            raise ToolError(f"tools/list failed: {exc}", server=self._name) from None
        inside = self._in_workspace()
        return [
            tool_spec(self._name, t, trusted=self.config.trusted, in_workspace=inside)
            for t in tools
        ]

    def _in_workspace(self) -> bool:
        """Whether this server is given a path in the workspace (read from its configuration
        as expanded with its own tenant's environment): privacy then gives its tools tokens,
        whatever configuration privacy itself can read later."""
        ws = self.isolation.workspace
        return ws is not None and touches_workspace(self.config, ws)

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> ToolCallResult:
        if not self.config.allows(tool):
            raise ToolNotFound(
                "excluded by this server's include/exclude configuration",
                server=self._name,
                tool=tool,
            )
        limit = timeout if timeout is not None else self.default_timeout
        if self.config.timeout:  # the operator's limit for this server: a ceiling for all
            limit = min(limit, self.config.timeout)
        conn, client = await self._client()
        with schema_warnings() as sink:
            result = await self._call(conn, client, tool, arguments, limit)
        return call_result(result, sink)

    async def _call(
        self, conn: Connection, client: Client, tool: str, arguments: dict[str, Any], limit: float
    ) -> mt.CallToolResult:
        """One ``tools/call``, its failures translated into ``codemode.errors``."""
        # The run's trace context, formatted by its span identity (observability.carrier);
        # None: the SDK passes on whatever trace is current, as it always does.
        carry = carrier.carry
        trace = None if carry is None else carry()
        try:
            async with asyncio.timeout(limit):
                if trace is None:
                    return await client.call_tool(tool, arguments)
                try:  # meta: an open TypedDict (PEP 728), which mypy does not read yet
                    return await client.call_tool(tool, arguments, meta=trace[0])  # type: ignore[arg-type]
                finally:
                    carrier.restore(trace[1])  # the run's span current again
        except TimeoutError:
            self._retire(conn, limit)
            raise ToolTimeout(
                f"no answer within {limit:g} s; the call was cancelled and the server is "
                "restarted for the next calls",
                server=self._name,
                tool=tool,
            ) from None
        except MCPError as exc:
            if exc.code == mt.CONNECTION_CLOSED:
                await self._drop(conn)
                err = await self._lost(conn, f"the call to {tool}", exc.message)
                err.tool = tool
                raise err from exc
            if exc.code == mt.REQUEST_TIMEOUT:
                raise ToolTimeout(exc.message, server=self._name, tool=tool) from exc
            raise ToolError(
                f"{exc.message} (MCP error {exc.code})", server=self._name, tool=tool
            ) from exc
        except (OSError, httpx2.HTTPError, *_CLOSED) as exc:
            await self._drop(conn)
            raise ServerUnavailable(
                f"call failed: {describe(exc)}; the next call reconnects",
                server=self._name,
                tool=tool,
            ) from exc
        except pydantic.ValidationError as exc:
            raise ToolError(
                f"the server sent a malformed result: {exc.error_count()} validation error(s)",
                server=self._name,
                tool=tool,
            ) from exc

    def _retire(self, conn: Connection, grace: float) -> None:
        """A call timed out: the server may be wedged (a FIFO, a hang), for every caller.
        New calls go to a fresh process at once; the old one is stopped once the calls
        still running on it have had ``grace`` seconds (their own timeout) to finish."""
        if self._conn is not conn:
            return
        self._conn = None

        async def stop_later() -> None:
            try:
                await asyncio.sleep(grace)
            finally:
                self._retired.pop(conn, None)
                await conn.stop()

        self._retired[conn] = asyncio.get_running_loop().create_task(stop_later())

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        for old, task in list(self._retired.items()):
            task.cancel()
            await old.stop()
        if conn is not None:
            await conn.stop()
