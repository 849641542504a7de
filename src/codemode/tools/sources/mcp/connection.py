"""One live connection to an upstream MCP server, and the background task owning it.

Life of a connection:

- **owned by a background task** that enters the ``Client`` context and waits for a stop
  signal, because the SDK's transports live in task groups that must be exited by the task
  that entered them; calls themselves run in the callers' tasks;
- **listens** (2026-07-28 protocol) on a ``subscriptions/listen`` stream for the server's
  tool changes, in a task of the owner's, closed with the connection;
- **dies** when the server exits (stdio: end of its stderr pipe; any transport: a call
  failing with "connection closed"); the source then replaces it on the next call;
- **bound to one event loop**: the source makes a fresh one for another loop (the old
  loop's teardown already cancelled the owner task, which stops the child).

Failures to start are translated here into :class:`ServerUnavailable` (with the stderr tail).
The connection knows its source only as a :class:`ConnectionOwner` (settings and a callback).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Protocol, cast

import anyio
import httpx2
import mcp_types as mt
from mcp import Client
from mcp.client import Transport
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types.version import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS

from codemode.config import RemoteServerConfig, ServerConfig, StdioServerConfig
from codemode.errors import ServerUnavailable
from codemode.isolation.servers import Isolation, ServerLaunch, plan
from codemode.tools.sources.mcp.capped import MessageCap
from codemode.tools.sources.mcp.lenient import install_lenient_validation
from codemode.tools.sources.mcp.stderr import StderrTail, describe, leaf_errors, with_tail
from codemode.tools.sources.mcp.stdio import bounded_stdio_client
from codemode.tools.sources.mcp.surrogates import repairing_client

log = logging.getLogger("codemode.tools.sources.mcp")  # the name it had before the split

_STDERR_DRAIN_WAIT = 1.0
_STOP_WAIT = 10.0
_LISTEN_TRIES = 5
_LISTEN_RETRY = 1.0  # seconds before the next try, times the failures so far


@asynccontextmanager
async def _http_transport(
    url: str,
    headers: dict[str, str],
    connect_timeout: float,
    max_message: int,
    on_too_large: Callable[[str], None],
) -> AsyncIterator[Any]:
    timeout = httpx2.Timeout(connect_timeout, read=300.0)
    # One message at most ``max_message`` bytes: a JSON body by the cap's hooks, an event
    # of a stream by the SDK's own per-event limit.
    cap = MessageCap(max_message, on_too_large)
    async with (
        cap.client(headers=headers, timeout=timeout) as http,
        streamable_http_client(url, http_client=http, max_sse_event_size=max_message) as streams,
    ):
        yield streams


class ConnectionOwner(Protocol):
    """What a connection reads from its source, at the moment it needs it."""

    config: ServerConfig
    isolation: Isolation
    connect_timeout: float
    protocol: str

    @property
    def name(self) -> str: ...

    def tools_changed(self, *, now: bool = False) -> None: ...


def _listens(client: Client) -> bool:
    """Whether the server's tool changes would come on a listen stream: 2026-07-28, unless
    it said it has none (a client given the version skips discovery: nothing is said; a
    server without the method answers "method not found", and is not asked again)."""
    tools = client.server_capabilities.tools
    return client.protocol_version in MODERN_PROTOCOL_VERSIONS and (
        tools is None or bool(tools.list_changed)
    )


def _mode(protocol: str) -> str:
    return LATEST_MODERN_VERSION if protocol == "modern" else protocol


class Connection:
    """One live ``mcp.Client`` and the background task that owns its context."""

    def __init__(self, source: ConnectionOwner) -> None:
        self.source = source
        self.loop = asyncio.get_running_loop()
        self.client: Client | None = None
        self.dead = False
        self.broken: str | None = None  # why the transport gave up on the server, if it did
        self.stderr: StderrTail | None = None
        self.launch: ServerLaunch | None = None
        self._ready: asyncio.Future[None] = self.loop.create_future()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._pid: int | None = None  # of a stdio server: its process group's id too
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
            self.stderr = StderrTail()
            self.stderr.on_eof(self._mark_dead_threadsafe)
            assert self.stderr.writer is not None
            return cast(
                Transport,
                bounded_stdio_client(
                    params,
                    self.stderr.writer,
                    max_message=cfg.max_message_bytes,
                    on_too_large=self._give_up,
                    on_spawn=self._spawned,
                    pass_fds=self.launch.pass_fds,
                ),
            )
        if cfg.transport == "sse":
            client = repairing_client  # lone surrogates' escapes: see .surrogates
            return cast(
                Transport,
                sse_client(cfg.url, headers=cfg.headers or None, httpx_client_factory=client),
            )
        return cast(
            Transport,
            _http_transport(
                cfg.url,
                dict(cfg.headers),
                self.source.connect_timeout,
                cfg.max_message_bytes,
                self._give_up,
            ),
        )

    async def start(self) -> None:
        self._task = self.loop.create_task(self._own(), name=f"codemode-mcp-{self.source.name}")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), self.source.connect_timeout)
        except TimeoutError:
            await self.stop()
            raise ServerUnavailable(
                with_tail(
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
                    install_lenient_validation(
                        client.session,
                        self.output_schemas,
                        max_bytes=self.source.config.max_message_bytes,
                    )
                    self.client = client
                    if not self._ready.done():
                        self._ready.set_result(None)
                    async with anyio.create_task_group() as tg:
                        if _listens(client):
                            tg.start_soon(self._listen, client)
                        await self._stop.wait()
                        tg.cancel_scope.cancel()
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
                log.debug("MCP server %s: connection ended: %s", self.source.name, describe(exc))
        finally:
            self.dead = True
            self.client = None
            if self.stderr is not None:
                self.stderr.release_writer()
            if self.launch is not None:
                self.launch.cleanup()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            self.source.tools_changed()  # coalesced there (a server may send them in a loop)

    async def _listen(self, client: Client) -> None:
        """On 2026-07-28 a server's tool changes arrive only on a ``subscriptions/listen``
        stream: one per connection, each event fed where the classic notice goes. A stream
        that drops is opened again (its missed events: the listing is forgotten once)."""
        failures = 0
        while failures < _LISTEN_TRIES:
            try:
                async with client.listen(tools_list_changed=True) as stream:
                    if not stream.honored.tools_list_changed:
                        return
                    if failures:
                        self.source.tools_changed()
                    failures = 0
                    async for event in stream:
                        if isinstance(event, ToolsListChanged):
                            self.source.tools_changed()
                return  # the server closed the stream: it is stopping
            except ListenNotSupportedError:
                return
            except MCPError as exc:
                if exc.code == mt.METHOD_NOT_FOUND:
                    return
                why: BaseException = exc
            except (SubscriptionLost, TimeoutError) as exc:
                why = exc
            except Exception as exc:  # noqa: BLE001 - boundary of a background task
                why = exc
            failures += 1
            log.debug("MCP server %s: listen stream ended: %s", self.source.name, describe(why))
            await anyio.sleep(_LISTEN_RETRY * failures)
        log.warning(
            "MCP server %s: its subscriptions/listen stream kept failing; its tool changes "
            "are seen only when a call names a tool it no longer lists",
            self.source.name,
        )

    async def _start_error(self, exc: BaseException, cfg: ServerConfig) -> BaseException:
        if isinstance(exc, ServerUnavailable | KeyboardInterrupt | SystemExit):
            return exc
        leaves = leaf_errors(exc)
        if isinstance(cfg, StdioServerConfig):
            if any(isinstance(e, FileNotFoundError) for e in leaves):
                what = f"command not found: {cfg.command!r}"
            elif any(isinstance(e, PermissionError) for e in leaves):
                what = f"command not executable: {cfg.command!r}"
            elif any(isinstance(e, MCPError) and e.code == mt.CONNECTION_CLOSED for e in leaves):
                what = f"{cfg.command!r} exited during the MCP handshake"
            else:
                what = f"cannot start {cfg.command!r}: {describe(exc)}"
            tail = await self.settled_stderr(_STDERR_DRAIN_WAIT)
        else:
            assert isinstance(cfg, RemoteServerConfig)
            what = f"cannot connect to {cfg.url}: {describe(exc)}"
            tail = ""
        err = ServerUnavailable(with_tail(what, tail), server=self.source.name)
        err.__cause__ = exc
        return err

    def _spawned(self, pid: int) -> None:
        self._pid = pid

    def _mark_dead_threadsafe(self) -> None:
        with contextlib.suppress(RuntimeError):  # loop already closed
            self.loop.call_soon_threadsafe(self._mark_dead)

    def _give_up(self, reason: str) -> None:
        self.broken = reason
        self._mark_dead()

    def _mark_dead(self) -> None:
        self.dead = True
        self._stop.set()

    async def stop(self) -> None:
        """Ask the owner task to leave the client context (stopping the child) and wait.

        The stop runs in a task of its own, shared by every caller: a caller cancelled
        while it waits is cancelled at once (its cancellation is never swallowed), and
        the server is stopped all the same."""
        self._mark_dead()
        task = self._task
        if task is None or task.done():
            return
        if asyncio.get_running_loop() is not self.loop:
            return  # the other loop's teardown cancels it
        if self._stopping is None:
            name = f"codemode-mcp-stop-{self.source.name}"
            self._stopping = self.loop.create_task(self._see_stopped(task), name=name)
        await asyncio.wait([self._stopping])  # raises the caller's own cancellation

    async def _see_stopped(self, task: asyncio.Task[None]) -> None:
        if not self._ready.done():
            self._scope.cancel()  # still in the handshake: it is not waiting for the stop signal
        done, _ = await asyncio.wait({task}, timeout=_STOP_WAIT)
        if done:
            return
        # The SDK's bounded shutdown did not end in time. Kill the server's process
        # group first: cancelling the owner natively cuts that shutdown short and left
        # a server that ignores SIGTERM alive.
        if self._pid is not None:
            log.warning("MCP server %s: did not stop in time; killing it", self.source.name)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._pid, signal.SIGKILL)
            done, _ = await asyncio.wait({task}, timeout=_STOP_WAIT)
        if not done:  # last resort: the owner waits on something else
            task.cancel()
            await asyncio.wait({task}, timeout=_STOP_WAIT)
