"""``codemode serve`` over stdio: one client, graceful stop on a signal.

The server runs until the client closes stdin. On SIGTERM/SIGINT/SIGHUP it drains
(:func:`~codemode.server.lifecycle.drain`): running calls finish within the grace
period, the rest are cancelled, and every answer is written out before the process
exits. Exiting is forced (``os._exit``) once everything is closed, because stdin is
read in a thread that cannot be cancelled: waiting for it would keep the process alive
until the client writes or closes stdin. The wire itself (bounded lines in, every line
that is not a message answered with a JSON-RPC error) is :mod:`.stdio_wire`.

A client that closes its end of our stdout (its read end) is gone: nobody can receive an
answer any more. The server notices it at once on a pipe (a pipe whose reader is gone
polls as an error, so a long call does not keep it unnoticed) or when a write fails
(``EPIPE``/``ECONNRESET``, e.g. a socket), then stops without a grace period: running
calls are cancelled, every session (and its worker) and the upstream servers are
closed, and the process exits with status 0, without waiting for stdin to close. Status
0 because the client ending the conversation is the normal end of a stdio server's
service, as closing stdin is; clients often close stdout first when they stop a server,
and a non-zero status would read as a crash of the server.

Knowing when "every answer is written out" needs two counters the SDK does not keep:
the requests read but not yet answered, and the messages handed to the stdout writer
but not yet flushed. Thin wrappers around the server's streams and stdout keep them.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import io
import logging
import os
import select
import signal
import stat
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import suppress
from types import TracebackType
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from .lifecycle import GracefulStop, drain
from .stdio_wire import StdinWire, max_in_flight, max_message, message_of, too_many
from .toolset import ServerContext

__all__ = ["serve_stdio"]

logger = logging.getLogger(__name__)
_GONE_ERRNOS = frozenset({errno.EPIPE, errno.ECONNRESET})


class _Pending:
    """Requests read but not answered, messages sent but not flushed.

    Requests are counted per id, as the SDK correlates them: ``"7"`` and ``7`` are one id
    (a cancel may name either), and a reused id is one more request (the SDK runs and
    answers each): a set counted those as one, so the in-flight cap held nothing back,
    and a cancel by the string form left its slot taken for ever."""

    def __init__(self) -> None:
        self.requests: Counter[str | int] = Counter()
        self.in_progress = 0
        self.sent = 0
        self.flushed = 0
        self._changed = anyio.Event()

    def started(self, request_id: Any) -> None:
        key = _key(request_id)
        if key is not None:
            self.requests[key] += 1
            self.in_progress += 1

    def ended(self, request_id: Any) -> None:
        key = _key(request_id)
        if key is None:
            return
        left = self.requests.get(key, 0)
        if left > 0:
            self.in_progress -= 1
            if left == 1:
                del self.requests[key]
            else:
                self.requests[key] = left - 1

    def read(self, message: Any) -> None:
        """Note a message the wire hands the server: counted before the server sees it,
        so the next line's check never reads a count the server has yet to update (a
        request sent right after a cancel was refused)."""
        if isinstance(message, JSONRPCRequest):
            self.started(message.id)
        elif isinstance(message, JSONRPCNotification) and message.method == (
            "notifications/cancelled"
        ):  # a request the client cancelled is never answered
            params = message.params if isinstance(message.params, dict) else {}
            self.ended(params.get("requestId"))
            self.changed()

    def changed(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    @property
    def unread(self) -> int:
        """Messages handed to the writer and not flushed yet: the client is not reading."""
        return self.sent - self.flushed

    @property
    def quiet(self) -> bool:
        return not self.in_progress and self.flushed >= self.sent

    async def wait_quiet(self) -> None:
        while not self.quiet:
            await self._changed.wait()


def _key(request_id: Any) -> str | int | None:
    """The id as the SDK correlates it, or None for one that names no request."""
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return coerce_request_id(request_id)


class _Writing:
    """The SDK's write stream, noting each answer that goes out.

    ``answers_requests`` is False for the wire's own answers (a refusal, an invalid
    line): they end no request the server took, even when they carry a running one's id."""

    def __init__(self, inner: Any, pending: _Pending, answers_requests: bool = True) -> None:
        self._inner = inner
        self._pending = pending
        self._answers_requests = answers_requests

    async def send(self, item: SessionMessage) -> None:
        self._pending.sent += 1
        try:
            await self._inner.send(item)
        except BaseException:
            self._pending.sent -= 1
            raise
        # Only now: an answer waiting for a full pipe keeps its request's slot, so a
        # client that does not read its answers is no longer read from.
        if self._answers_requests and isinstance(item.message, JSONRPCResponse | JSONRPCError):
            self._pending.ended(item.message.id)
        self._pending.changed()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Writing:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _Stdout(anyio.AsyncFile[str]):
    """The wire: a private copy of fd 1, counting flushed messages (one flush each)."""

    def __init__(self, pending: _Pending) -> None:
        # Stray writes to fd 1 (a handler's print, a child process) must not corrupt
        # the protocol: fd 1 now points at stderr, the wire is a private duplicate.
        wire = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
        os.dup2(2, 1)
        self.fd = wire
        raw = os.fdopen(wire, "wb", closefd=False)
        super().__init__(io.TextIOWrapper(raw, encoding="utf-8"))
        self._pending = pending

    async def flush(self) -> None:
        await super().flush()
        self.count_flushed()

    def count_flushed(self) -> None:
        self._pending.flushed += 1
        self._pending.changed()


async def _watch_reader(fd: int, gone: Callable[[], None]) -> None:
    """Call ``gone`` once the reader of the pipe ``fd`` has closed it, even while nothing
    is written (a long call would otherwise hold its worker until its answer fails).

    Only for a pipe: a socket or a terminal can be readable for other reasons, and a
    failed write tells for them."""
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        return
    poll = select.poll()
    poll.register(fd, 0)  # errors and hang-ups are always reported
    while True:
        await anyio.wait_readable(fd)  # epoll reports a pipe's error as readable
        if any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0)):
            gone()
            return
        await anyio.sleep(1)  # not expected on a pipe's write end: never spin


async def serve_stdio(
    server: MCPServer[Any],
    context: ServerContext,
    stop: GracefulStop,
    close_all: Callable[[], Awaitable[None]],
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Serve until the client closes stdin (then return) or a signal (then exit 0).

    ``on_ready`` runs once the signals are handled (a hint that says Ctrl-C stops the
    server must not come before Ctrl-C does)."""
    low = server._lowlevel_server  # the SDK's own run_stdio_async does just this
    stop.bind()
    pending = _Pending()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.request)
    if on_ready is not None:
        on_ready()

    async def graceful() -> None:
        await stop.wait()
        await drain(context, stop, pending.wait_quiet)
        with anyio.CancelScope(shield=True), anyio.move_on_after(30):
            await close_all()
        with suppress(OSError):  # the client may have closed stderr too
            sys.stderr.flush()
        os._exit(0)

    gone = anyio.Event()

    def client_left() -> None:
        if gone.is_set():
            return
        gone.set()
        logger.warning(
            "the client closed its end of stdout: stopping (%d running call(s) cancelled)",
            len(context.calls),
        )
        stop.request_now()

    limit, most = max_message(), max_in_flight()
    stdout = _Stdout(pending)
    stdin = StdinWire(limit)
    read_send, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_out = anyio.create_memory_object_stream[SessionMessage](0)
    writing = _Writing(write_stream, pending)

    async def wire_in(answers: _Writing) -> None:
        """Lines -> messages for the server; what is not one is answered here."""
        async with read_send, answers:
            async for line in stdin.lines():
                message, is_error = message_of(line, limit)
                if message is None:
                    continue
                # Answers waiting for a client that does not read count too: a cancel
                # frees a request's slot, but not the answer already on its way out
                # (30,000 requests each cancelled at once grew the server to 2 GB).
                full = pending.in_progress >= most or pending.unread >= most
                busy = too_many(message, most) if full else None
                if not is_error and busy is not None:
                    message, is_error = busy, True
                if not is_error:
                    pending.read(message.message)
                try:
                    await (answers.send if is_error else read_send.send)(message)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return  # the server stopped reading: nothing more to hand it

    async def wire_out() -> None:
        async with write_out:
            async for item in write_out:
                if not gone.is_set():
                    text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    try:
                        await stdout.write(text + "\n")
                        await stdout.flush()
                        continue
                    except OSError as exc:
                        if exc.errno not in _GONE_ERRNOS:
                            raise
                        client_left()
                # Nobody reads: the answer is dropped, as if written, so the stop's
                # wait for every answer to be out ends and no handler blocks on us.
                stdout.count_flushed()

    async with anyio.create_task_group() as tg:
        tg.start_soon(context.sessions.run_reaper)
        tg.start_soon(graceful)
        tg.start_soon(_watch_reader, stdout.fd, client_left)
        async with anyio.create_task_group() as wire:  # ends once every answer is out
            wire.start_soon(wire_out)
            wire.start_soon(
                wire_in, _Writing(write_stream.clone(), pending, answers_requests=False)
            )
            await low.run(read_stream, writing, low.create_initialization_options())
        if not gone.is_set():  # else the stop under way closes everything and exits
            tg.cancel_scope.cancel()
