"""An upstream MCP server as a codemode tool source (the only core module importing ``mcp``).

One :class:`MCPSource` holds at most one live connection (a ``mcp.Client``) and shares it
between every caller of the process; concurrent calls are multiplexed by the SDK.

Life of a connection:

- **lazy**: nothing starts until the first ``list_tools``/``call_tool``;
- **owned by a background task** that enters the ``Client`` context and waits for a stop
  signal, because the SDK's transports live in task groups that must be exited by the task
  that entered them; calls themselves run in the callers' tasks;
- **dies** when the server exits (stdio: end of its stderr pipe; any transport: a call
  failing with "connection closed") and is **replaced** on the next call; a call that was
  in flight when the server died fails with :class:`ServerUnavailable` (it may have run, so
  it is not retried), while ``list_tools`` (read-only) is retried once;
- **bound to one event loop**: if used from another loop, a fresh connection is made there
  (the old loop's teardown already cancelled the owner task, which stops the child).

SDK errors are translated here, in one place, into ``codemode.errors``::

    OSError on spawn, early exit, refused connection   -> ServerUnavailable (with stderr tail)
    connection closed mid-call                          -> ServerUnavailable
    per-call timeout (call cancelled upstream)          -> ToolTimeout
    JSON-RPC error answer, malformed result             -> ToolError

A result whose ``structured_content`` breaks the tool's own ``outputSchema`` is kept: the SDK's
re-validation (``ClientSession.validate_tool_result``) is replaced by codemode's host-safe
check, whose complaint becomes an entry in ``ToolCallResult.warnings`` instead of an exception.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import contextvars
import json
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, TextIO, cast

import anyio
import httpx2
import mcp_types as mt
import pydantic
from jsonschema.protocols import Validator
from mcp import Client
from mcp.client import ClientSession, Transport
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import LATEST_MODERN_VERSION

from codemode.config import RemoteServerConfig, ServerConfig, StdioServerConfig
from codemode.errors import ServerUnavailable, ToolError, ToolNotFound, ToolTimeout
from codemode.isolation.servers import Isolation, ServerLaunch, plan
from codemode.redact import redact_text
from codemode.tools.spec import BlobContent, Content, TextContent, ToolCallResult, ToolSpec
from codemode.tools.validate import compile_schema, schema_problem
from codemode_worker.bounds import keep_head

__all__ = ["MCPSource"]

log = logging.getLogger(__name__)

STDERR_TAIL_BYTES = 8192
TAIL_LINES = 5
TAIL_CHARS = 1_000
_STDERR_DRAIN_WAIT = 1.0
_STOP_WAIT = 10.0
_CLOSED = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)

# Where the lenient output-schema check records its complaint for the call in this task.
_schema_warnings: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "codemode_mcp_schema_warnings", default=None
)


# --------------------------------------------------------------------------- stderr capture


class _StderrTail:
    """The child's stderr, drained by a thread into a bounded buffer.

    The child writes into a pipe; a daemon thread keeps the last ``limit`` bytes. End of the
    pipe means the child (and anything that inherited its stderr) has exited.
    """

    def __init__(self, limit: int = STDERR_TAIL_BYTES) -> None:
        self._limit = limit
        self._buf = bytearray()
        self.lines = 0  # newlines the child wrote in all (the buffer keeps only the tail)
        self._lock = threading.Lock()
        read_fd, write_fd = os.pipe()
        self._read_fd = read_fd
        self.writer: TextIO | None = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self.closed = threading.Event()
        self._on_eof: Callable[[], None] | None = None
        self._thread = threading.Thread(target=self._pump, name="codemode-mcp-stderr", daemon=True)
        self._thread.start()

    def on_eof(self, callback: Callable[[], None]) -> None:
        self._on_eof = callback
        if self.closed.is_set():
            callback()

    def release_writer(self) -> None:
        """Drop the parent's copy of the write end, so EOF arrives when the child exits."""
        if self.writer is not None:
            with contextlib.suppress(OSError):
                self.writer.close()
            self.writer = None

    def _pump(self) -> None:
        try:
            while chunk := os.read(self._read_fd, 65536):
                with self._lock:
                    self._buf += chunk
                    self.lines += chunk.count(b"\n")
                    if len(self._buf) > 2 * self._limit:
                        del self._buf[: len(self._buf) - self._limit]
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                os.close(self._read_fd)
            self.closed.set()
            if self._on_eof is not None:
                self._on_eof()

    async def settled(self, wait: float) -> str:
        """The tail once the pipe ended (or ``wait`` s passed), without blocking the loop."""
        deadline = time.monotonic() + wait
        while not self.closed.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return self.text()

    def text(self) -> Tail:
        with self._lock:
            data = bytes(self._buf[-self._limit :])
            lines = self.lines
        return Tail(data.decode("utf-8", errors="replace").strip(), lines)


class Tail(str):
    """The end of a server's stderr, knowing how many lines the whole stderr had."""

    total_lines: int

    def __new__(cls, text: str, total_lines: int = 0) -> Tail:
        self = super().__new__(cls, text)
        self.total_lines = total_lines
        return self


def _with_tail(message: str, tail: str, lines: int = TAIL_LINES) -> str:
    """``message (last stderr: ...)``: the last non-empty lines; credentials are removed
    from both (an upstream's words may carry them, e.g. a URL with a token).

    When lines were left out, the note says how many of how many are shown.
    """
    message = redact_text(message)
    kept = [line.strip() for line in tail.splitlines() if line.strip()]
    if not kept:
        return message
    total = max(getattr(tail, "total_lines", 0), len(kept))
    shown = kept[-lines:]
    text = keep_head(redact_text(" | ".join(shown)), TAIL_CHARS)
    label = "last stderr" if len(shown) == total else f"last {len(shown)} of {total} stderr lines"
    return f"{message} ({label}: {text})"


def _leaf_errors(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaf_errors(sub)]
    return [exc]


def _describe(exc: BaseException) -> str:
    leaves = _leaf_errors(exc)
    return "; ".join(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__ for e in leaves)


# --------------------------------------------------------------------------- transports


@asynccontextmanager
async def _http_transport(
    url: str, headers: dict[str, str], connect_timeout: float
) -> AsyncIterator[Any]:
    timeout = httpx2.Timeout(connect_timeout, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def _mode(protocol: str) -> str:
    return LATEST_MODERN_VERSION if protocol == "modern" else protocol


# --------------------------------------------------------------------------- connection


class _Connection:
    """One live ``mcp.Client`` and the background task that owns its context."""

    def __init__(self, source: MCPSource) -> None:
        self.source = source
        self.loop = asyncio.get_running_loop()
        self.client: Client | None = None
        self.dead = False
        self.stderr: _StderrTail | None = None
        self.launch: ServerLaunch | None = None
        self._ready: asyncio.Future[None] = self.loop.create_future()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # The owner task is cancelled through this scope, never natively: the SDK's
        # transport shields its shutdown (stop the child, close the pipes) from anyio's
        # cancellation only, and a native cancel cutting that shutdown short leaves the
        # child alive and the task waiting forever on its stdout.
        self._scope = anyio.CancelScope()
        self.output_schemas: dict[str, Any] = {}  # tool -> outputSchema, for results' check

    def stderr_text(self) -> str:
        return self.stderr.text() if self.stderr is not None else ""

    async def settled_stderr(self, wait: float) -> str:
        return await self.stderr.settled(wait) if self.stderr is not None else ""

    def _transport(self) -> Transport:
        cfg = self.source.config
        if isinstance(cfg, StdioServerConfig):
            self.launch = plan(cfg, self.source.isolation)
            params = StdioServerParameters(
                command=self.launch.command,
                args=self.launch.args,
                env=self.launch.env,
                cwd=self.launch.cwd,
            )
            self.stderr = _StderrTail()
            self.stderr.on_eof(self._mark_dead_threadsafe)
            assert self.stderr.writer is not None
            return cast(Transport, stdio_client(params, errlog=self.stderr.writer))
        if cfg.transport == "sse":
            return cast(Transport, sse_client(cfg.url, headers=cfg.headers or None))
        return cast(
            Transport, _http_transport(cfg.url, dict(cfg.headers), self.source.connect_timeout)
        )

    async def start(self) -> None:
        self._task = self.loop.create_task(self._own(), name=f"codemode-mcp-{self.source.name}")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), self.source.connect_timeout)
        except TimeoutError:
            await self.stop()
            raise ServerUnavailable(
                _with_tail(
                    f"did not answer within {self.source.connect_timeout:g} s",
                    self.stderr_text(),
                ),
                server=self.source.name,
            ) from None
        except asyncio.CancelledError:
            await self.stop()
            me = asyncio.current_task()
            if me is not None and me.cancelling() == 0:  # stopped by another task, not us
                raise ServerUnavailable(
                    "closed while it was still connecting (codemode is shutting down)",
                    server=self.source.name,
                ) from None
            raise
        except BaseException:
            await self.stop()
            raise

    async def _own(self) -> None:
        cfg = self.source.config
        try:
            with self._scope:
                async with AsyncExitStack() as stack:
                    client = Client(
                        self._transport(),
                        mode=_mode(self.source.protocol),
                        cache=None,
                        message_handler=self._on_message,
                    )
                    try:
                        await stack.enter_async_context(client)
                    finally:
                        if self.stderr is not None:
                            self.stderr.release_writer()
                    _install_lenient_validation(client.session, self.output_schemas)
                    self.client = client
                    if not self._ready.done():
                        self._ready.set_result(None)
                    await self._stop.wait()
            if not self._ready.done():  # stopped in the handshake
                self._ready.cancel()
        except asyncio.CancelledError:
            if not self._ready.done():
                self._ready.cancel()
            raise
        except BaseException as exc:  # noqa: BLE001 - boundary of a background task: hand it over
            if not self._ready.done():
                self._ready.set_exception(await self._start_error(exc, cfg))
            else:
                log.debug("MCP server %s: connection ended: %s", self.source.name, _describe(exc))
        finally:
            self.dead = True
            self.client = None
            if self.stderr is not None:
                self.stderr.release_writer()
            if self.launch is not None:
                self.launch.cleanup()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            self.output_schemas.clear()
            self.source.tools_changed()

    async def _start_error(self, exc: BaseException, cfg: ServerConfig) -> BaseException:
        if isinstance(exc, ServerUnavailable | KeyboardInterrupt | SystemExit):
            return exc
        leaves = _leaf_errors(exc)
        if isinstance(cfg, StdioServerConfig):
            if any(isinstance(e, FileNotFoundError) for e in leaves):
                what = f"command not found: {cfg.command!r}"
            elif any(isinstance(e, PermissionError) for e in leaves):
                what = f"command not executable: {cfg.command!r}"
            elif any(isinstance(e, MCPError) and e.code == mt.CONNECTION_CLOSED for e in leaves):
                what = f"{cfg.command!r} exited during the MCP handshake"
            else:
                what = f"cannot start {cfg.command!r}: {_describe(exc)}"
            tail = await self.settled_stderr(_STDERR_DRAIN_WAIT)
        else:
            assert isinstance(cfg, RemoteServerConfig)
            what = f"cannot connect to {cfg.url}: {_describe(exc)}"
            tail = ""
        err = ServerUnavailable(_with_tail(what, tail), server=self.source.name)
        err.__cause__ = exc
        return err

    def _mark_dead_threadsafe(self) -> None:
        with contextlib.suppress(RuntimeError):  # loop already closed
            self.loop.call_soon_threadsafe(self._mark_dead)

    def _mark_dead(self) -> None:
        self.dead = True
        self._stop.set()

    async def stop(self) -> None:
        """Ask the owner task to leave the client context (stopping the child) and wait."""
        self._mark_dead()
        task = self._task
        if task is None or task.done():
            return
        if asyncio.get_running_loop() is not self.loop:
            return  # the other loop's teardown cancels it
        if not self._ready.done():
            self._scope.cancel()  # still in the handshake: it is not waiting for the stop signal
        done, _ = await asyncio.wait({task}, timeout=_STOP_WAIT)
        if not done:  # last resort: the SDK's bounded shutdown did not end in time
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({task}, timeout=_STOP_WAIT)


def _install_lenient_validation(session: ClientSession, schemas: dict[str, Any]) -> None:
    """Check results against the tool's outputSchema with codemode's own validator.

    ``ClientSession.call_tool`` validates ``structured_content`` after the result arrived
    and raises ``RuntimeError`` on mismatch, losing the data; and it runs the schema's
    regular expressions on the host's event loop, where a server's ``pattern`` such as
    ``^(a+)+$`` and a matching result stall every session for minutes. Servers do break
    their own schemas: codemode keeps the data, records why it is suspect, and checks with
    :func:`codemode.tools.validate.compile_schema` (regexes are left to the server).
    ``schemas`` (tool -> outputSchema) is emptied when the server's tools change.
    """
    checkers: dict[str, tuple[Any, Validator | None]] = {}

    async def lenient(name: str, result: mt.CallToolResult) -> None:
        if name not in schemas:  # the SDK lists too when it meets a tool it does not know
            listing = await session.list_tools()
            schemas.update({t.name: t.output_schema for t in listing.tools})
        schema = schemas.get(name)
        if schema is None:
            return
        if result.structured_content is None:
            problem = f"Tool {name} has an output schema but did not return structured content"
        else:
            cached = checkers.get(name)
            if cached is None or cached[0] is not schema:
                cached = checkers[name] = (schema, compile_schema(dict(schema)))
            checker = cached[1]
            message = (
                None if checker is None else schema_problem(checker, result.structured_content)
            )
            if message is None:
                return
            problem = f"Invalid structured content returned by tool {name}: {message}"
        sink = _schema_warnings.get()
        if sink is None:
            raise RuntimeError(problem)
        sink.append(f"{problem}; the data is returned as the server sent it")

    # Instance attribute shadows the method for this session only.
    setattr(session, "validate_tool_result", lenient)  # noqa: B010


# --------------------------------------------------------------------------- conversion


def _tool_spec(server: str, tool: mt.Tool, *, trusted: bool = False) -> ToolSpec:
    annotations: dict[str, Any] = {}
    if tool.annotations is not None:
        annotations = tool.annotations.model_dump(exclude_none=True, by_alias=True)
    title = tool.title or annotations.get("title")
    return ToolSpec(
        server=server,
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema) or {"type": "object", "properties": {}},
        output_schema=dict(tool.output_schema) if tool.output_schema is not None else None,
        annotations=annotations,
        title=title,
        trusted=trusted,
    )


def _b64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return data.encode()


def _content(block: Any) -> Content:
    if isinstance(block, mt.TextContent):
        return TextContent(block.text)
    if isinstance(block, mt.ImageContent):
        return BlobContent(_b64(block.data), block.mime_type, kind="image")
    if isinstance(block, mt.AudioContent):
        return BlobContent(_b64(block.data), block.mime_type, kind="audio")
    if isinstance(block, mt.EmbeddedResource):
        res = block.resource
        if isinstance(res, mt.TextResourceContents):
            return TextContent(res.text)
        mime = res.mime_type or "application/octet-stream"
        return BlobContent(_b64(res.blob), mime, kind="resource", uri=str(res.uri))
    if isinstance(block, mt.ResourceLink):
        link = {"type": "resource_link", "uri": str(block.uri), "name": block.name}
        if block.mime_type:
            link["mimeType"] = block.mime_type
        if block.description:
            link["description"] = block.description
        return TextContent(json.dumps(link))
    if isinstance(block, pydantic.BaseModel):
        return TextContent(block.model_dump_json(by_alias=True, exclude_none=True))
    return TextContent(str(block))


def _call_result(result: mt.CallToolResult, warnings: list[str]) -> ToolCallResult:
    return ToolCallResult(
        content=[_content(b) for b in result.content],
        structured=result.structured_content,
        is_error=bool(result.is_error),
        warnings=list(warnings),
    )


# --------------------------------------------------------------------------- the source


class MCPSource:
    """Tools of one upstream MCP server (stdio, streamable HTTP or SSE)."""

    # Results are already checked against the tool's outputSchema (by the SDK, made
    # lenient above); a mismatch arrives as an entry of ``ToolCallResult.warnings``.
    validates_output = True

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
        self._retired: dict[_Connection, asyncio.Task[None]] = {}
        self.default_timeout = config.timeout or default_timeout
        self.connect_timeout = config.connect_timeout or connect_timeout
        self.protocol = config.protocol or protocol or "auto"
        if self.protocol not in ("auto", "legacy", "modern"):
            raise ValueError(f"protocol must be auto, legacy or modern, not {self.protocol!r}")
        self._conn: _Connection | None = None
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self._tools: list[ToolSpec] | None = None
        self._failure: ServerUnavailable | None = None  # the last start's error, if it failed
        self._starts_finished = 0
        self.connects = 0  # how many connections were made (observable reconnects)
        # Bumped whenever the tool listing may have changed (new connection, or the server
        # sent notifications/tools/list_changed); the registry re-lists when it moves.
        self.listing_version = 0

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

    def tools_changed(self) -> None:
        """Forget the cached listing: the next ``list_tools`` asks the server again."""
        self._tools = None
        self.listing_version += 1

    # ------------------------------------------------------------------ connection

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            self._locks = {lp: lk for lp, lk in self._locks.items() if not lp.is_closed()}
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def _client(self) -> tuple[_Connection, Client]:
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
                conn = _Connection(self)
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
                    self.tools_changed()  # a restarted server may offer other tools
            assert conn.client is not None
            return conn, conn.client

    async def _drop(self, conn: _Connection) -> None:
        if self._conn is conn:
            await conn.stop()

    async def _lost(self, conn: _Connection, during: str) -> ServerUnavailable:
        tail = await conn.settled_stderr(0.2)
        return ServerUnavailable(
            _with_tail(f"connection lost during {during}; the next call reconnects", tail),
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
                    _with_tail(
                        f"did not answer tools/list within {self.connect_timeout:g} s",
                        conn.stderr_text(),
                    ),
                    server=self._name,
                ) from None
            except (OSError, httpx2.HTTPError, pydantic.ValidationError) as exc:
                await self._drop(conn)
                raise ServerUnavailable(
                    f"tools/list failed: {_describe(exc)}", server=self._name
                ) from exc
            self._tools = [s for s in specs if self.config.allows(s.name)]
            return list(self._tools)
        raise AssertionError("unreachable")

    async def _list_all(self, client: Client) -> list[ToolSpec]:
        specs: list[ToolSpec] = []
        cursor: str | None = None
        for _ in range(1000):  # a paginator that never ends cannot hang us
            page = await client.list_tools(cursor=cursor)
            specs.extend(_tool_spec(self._name, t, trusted=self.config.trusted) for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return specs

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
        sink: list[str] = []
        token = _schema_warnings.set(sink)
        try:
            async with asyncio.timeout(limit):
                result = await client.call_tool(tool, arguments)
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
                err = await self._lost(conn, f"the call to {tool}")
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
                f"call failed: {_describe(exc)}; the next call reconnects",
                server=self._name,
                tool=tool,
            ) from exc
        except pydantic.ValidationError as exc:
            raise ToolError(
                f"the server sent a malformed result: {exc.error_count()} validation error(s)",
                server=self._name,
                tool=tool,
            ) from exc
        finally:
            _schema_warnings.reset(token)
        return _call_result(result, sink)

    def _retire(self, conn: _Connection, grace: float) -> None:
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
