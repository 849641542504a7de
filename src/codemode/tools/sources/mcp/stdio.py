"""The stdio transport, with a ceiling on the size of one message from the server.

The SDK's ``stdio_client`` buffers a line until its newline arrives, however long, and
re-joins the buffer with every chunk (quadratic in the line's length): a broken or hostile
server printing gigabytes without a newline fills the host's memory, slowly. This reader
splits lines in one pass over each chunk and gives up on a message as soon as its unfinished
part exceeds ``max_message`` bytes, before buffering the rest: the pending requests fail
("connection closed"), ``on_too_large`` says why, and the source restarts the server for the
next call, as it does when a server crashes.

Spawning and stopping the process (its own process group; close stdin, wait, then kill the
tree) are the SDK's, reused through its module-private helpers: ``mcp`` is pinned to 2.3.x,
and this module is the one to revisit on an upgrade.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import TextIO

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types as mt
from mcp.client import stdio as sdk_stdio
from mcp.client.stdio import StdioServerParameters
from mcp.os.win32.utilities import ServerProcess
from mcp.shared.message import SessionMessage

from codemode.tools.sources.mcp.surrogates import LONE_ESCAPE, repaired

log = logging.getLogger("codemode.tools.sources.mcp")

DEFAULT_MAX_MESSAGE = 32 * 1024 * 1024
_WRITER_FLUSH = 0.5


class MessageTooLarge(Exception):
    """The server sent a message longer than the configured ceiling."""


class LineSplitter:
    """Newline-delimited messages out of a byte stream, none longer than ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if self._partial:
                line = bytes(self._partial) + chunk[start:end]
                self._partial.clear()
            else:
                line = chunk[start:end]
            self._check(len(line))
            yield line
            start = end + 1
        self._check(len(self._partial) + len(chunk) - start)
        self._partial += chunk[start:]

    def _check(self, size: int) -> None:
        if size > self.limit:
            raise MessageTooLarge(
                f"the server sent a message larger than the {self.limit:,}-byte limit "
                "(max_message_bytes in its configuration)"
            )


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(mt.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # surfaced by the session, as the SDK's reader does
        if LONE_ESCAPE.search(line) is None:
            return exc
        error = exc
    # A lone surrogate's escape ("\ud800"), refused by the SDK's parser: see .surrogates.
    try:
        loaded, _ = repaired(json.loads(line))
        return SessionMessage(mt.jsonrpc_message_adapter.validate_python(loaded, by_name=False))
    except (ValueError, RecursionError):
        return error


@asynccontextmanager
async def bounded_stdio_client(
    server: StdioServerParameters,
    errlog: TextIO,
    *,
    max_message: int = DEFAULT_MAX_MESSAGE,
    on_too_large: Callable[[str], None] = lambda reason: None,
    on_spawn: Callable[[int], None] = lambda pid: None,
    pass_fds: Sequence[int] = (),
) -> AsyncIterator[
    tuple[
        anyio.abc.ObjectReceiveStream[SessionMessage | Exception],
        anyio.abc.ObjectSendStream[SessionMessage],
    ]
]:
    """A transport for ``mcp.Client``: the server's process and its two message streams.

    ``pass_fds``: descriptors the process is given (a jail's mounts, held by descriptor)."""
    env = sdk_stdio.get_default_environment() | (server.env or {})
    if pass_fds:  # what the SDK's spawn does (a session of its own), with the descriptors
        process: ServerProcess = await anyio.open_process(
            [server.command, *server.args],
            env=env,
            stderr=errlog,
            cwd=server.cwd,
            start_new_session=True,
            pass_fds=pass_fds,
        )
    else:
        process = await sdk_stdio._create_platform_compatible_process(
            command=server.command, args=server.args, env=env, errlog=errlog, cwd=server.cwd
        )
    on_spawn(process.pid)  # its process group's id too (a session of its own)
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    closing = False

    async def read() -> None:
        assert process.stdout is not None
        splitter = LineSplitter(max_message)
        try:
            async with read_send:  # closed on the way out: the pending requests fail then
                try:
                    async for chunk in process.stdout:
                        for line in splitter.feed(chunk):
                            await read_send.send(_parse(line))
                except MessageTooLarge as exc:  # said before the requests learn of the end
                    log.warning("MCP server %s: %s", server.command, exc)
                    on_too_large(str(exc))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError) as exc:
            if not closing:
                log.debug("MCP server %s: stdout ended: %r", server.command, exc)
        finally:
            await sdk_stdio._drain_stdout(process)  # a server blocked on a full pipe cannot exit

    async def write() -> None:
        assert process.stdin is not None
        try:
            async with write_recv:
                async for message in write_recv:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_send.aclose()  # the session sees the end instead of waiting forever
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_recv.close()
        write_send.close()
        with anyio.move_on_after(_WRITER_FLUSH):
            await writer_done.wait()
        await sdk_stdio._stop_server_process(process)
        for stream in (read_recv, write_send, read_send, write_recv):
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await stream.aclose()
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        tg.start_soon(write)
        try:
            yield read_recv, write_send
        finally:
            closing = True
            with anyio.CancelScope(shield=True):  # the process must not outlive us
                await shutdown()
            tg.cancel_scope.cancel()
