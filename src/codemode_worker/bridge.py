"""Calls from the agent's code back to the host.

``call(method, params)`` blocks until the host answers; ``await acall(...)`` lets many calls
run at once. Both go through the one active ``HostLink`` (pipes in a subprocess worker,
the host's event loop for the in-process executor).
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from . import protocol
from .errors import CodemodeError, from_wire


class HostLink(Protocol):
    def call(self, method: str, params: dict[str, Any]) -> Any: ...

    def call_async(self, method: str, params: dict[str, Any]) -> Awaitable[Any]: ...


_link: HostLink | None = None


def set_link(link: HostLink | None) -> None:
    global _link
    _link = link


def _active() -> HostLink:
    if _link is None:
        raise CodemodeError("this worker is not connected to a host")
    return _link


def share_link() -> Callable[[], None] | None:
    """None without a host; else a function that, run in another thread, lets that thread
    call the host the way this one does (links routed per thread need it)."""
    link = _link
    if link is None:
        return None
    here = getattr(link, "here", None)
    if here is None:
        return lambda: None
    mine = here()
    return lambda: link.adopt(mine)  # type: ignore[attr-defined]


def call(method: str, params: dict[str, Any] | None = None) -> Any:
    """Call the host and wait for its answer; host errors are raised here."""
    return _active().call(method, params or {})


async def acall(method: str, params: dict[str, Any] | None = None) -> Any:
    """Call the host without blocking the event loop."""
    try:
        return await _active().call_async(method, params or {})
    except CodemodeError as exc:
        # No asyncio/futures frames in the agent's traceback.
        raise exc.with_traceback(None) from None


class _Pending:
    """One call waiting for its reply: a thread waits on it, or an asyncio future is fed.

    Lighter than ``concurrent.futures.Future`` (whose import alone costs the worker ~4 ms
    of start-up) and just as safe across threads.
    """

    __slots__ = ("_event", "_future", "error", "value")

    def __init__(self, future: Any = None) -> None:
        self._event = threading.Event()
        self._future = future  # an asyncio future to resolve, thread-safely
        self.value: Any = None
        self.error: BaseException | None = None

    def done(self) -> bool:
        return self._event.is_set()

    def settle(self, value: Any = None, error: BaseException | None = None) -> None:
        if self._event.is_set():
            return
        self.value, self.error = value, error
        self._event.set()
        fut = self._future
        if fut is not None:
            fut.get_loop().call_soon_threadsafe(_resolve, fut, value, error)

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


def _resolve(fut: Any, value: Any, error: BaseException | None) -> None:
    if not fut.done():
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(value)


class PipeLink:
    """HostLink over the worker's protocol pipes.

    Whichever thread holds ``_read_lock`` reads frames and hands replies to their waiters
    (leader/follower), so sync calls from any thread and async calls can interleave.
    Replies for unknown ids (a call abandoned by an interrupt) are dropped.
    """

    def __init__(
        self,
        fd_in: int,
        fd_out: int,
        *,
        call: int = protocol.MAX_FRAME,
        json: int = protocol.MAX_JSON,
        done: int = protocol.MAX_FRAME,
        values: int = protocol.MAX_VALUES,
    ) -> None:
        self.fd_in = fd_in
        self.fd_out = fd_out
        # The host's caps on what it reads from this worker (it stops a worker over them).
        self.max_call = call
        self.max_json = json
        self.max_done = done
        self.max_values = values
        self._poll = select.poll()
        self._poll.register(fd_in, select.POLLIN)
        self._buf = protocol.FrameBuffer()
        self._read_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._next = 0
        self._waiting: dict[int, _Pending] = {}
        self._commands: list[dict[str, Any]] = []
        self._readers: set[Any] = set()  # event loops with a reader on fd_in

    # -- sending ---------------------------------------------------------------
    def send(self, msg: dict[str, Any]) -> None:
        self.send_bytes(protocol.encode_frame(msg))

    def send_bytes(self, data: bytes) -> None:
        self.send_parts([data])

    def send_parts(self, parts: list[bytes | bytearray | memoryview]) -> None:
        with self._write_lock:
            for part in parts:
                view = memoryview(part)
                while view:
                    view = view[os.write(self.fd_out, view) :]

    def _start_call(
        self, method: str, params: dict[str, Any], future: Any = None
    ) -> tuple[int, _Pending]:
        fut = _Pending(future)
        with self._write_lock:
            self._next += 1
            cid = self._next
        msg = {"op": "call", "id": cid, "method": method, "params": params}
        parts = protocol.encode_parts(msg, max_json=self.max_json)
        self._check_size(parts)
        self._waiting[cid] = fut
        self.send_parts(parts)
        return cid, fut

    def _check_size(self, parts: list[bytes | bytearray | memoryview]) -> None:
        """Refuse here, with the reason, a call the host would refuse by stopping the worker."""
        size = protocol.parts_size(parts) - 4
        if size > self.max_call:
            raise CodemodeError(
                f"this call's data is {size / 2**20:.1f} MB once encoded; one call may "
                f"carry at most {self.max_call / 2**20:.0f} MB: split it into smaller calls"
            )
        text = len(parts[0]) - 4 - (len(parts) > 1)  # the JSON part (a newline ends it)
        if text > self.max_json:
            raise CodemodeError(
                f"this call's data has {text / 2**20:.1f} MB of JSON structure (lists, "
                f"dicts, numbers) besides its large strings and bytes; at most "
                f"{self.max_json / 2**20:.0f} MB may: send large data as bytes or str"
            )
        head = parts[0]
        assert isinstance(head, bytes)  # the header and the JSON, built by encode_parts
        if text > 1 << 18 and protocol.count_values(head, self.max_values) > self.max_values:
            raise CodemodeError(
                f"this call's data holds more than {self.max_values:,} JSON values (lists, "
                "dicts, numbers, strings); send large data as bytes or str (e.g. json.dumps)"
            )

    # -- receiving -------------------------------------------------------------
    def _dispatch(self, msg: dict[str, Any]) -> None:
        if msg.get("op") == "reply":
            fut = self._waiting.pop(int(msg["id"]), None)
            if fut is None:
                return
            if msg.get("ok"):
                fut.settle(msg.get("value"))
            else:
                fut.settle(error=from_wire(msg.get("error") or {}))
        else:
            self._commands.append(msg)

    def pump(self, block: bool) -> bool:
        """Read what is available (waiting if ``block``); False on EOF."""
        if not block and not self._poll.poll(0):
            return True
        data = os.read(self.fd_in, 1 << 16)
        if not data:
            return False
        for msg in self._buf.feed(data):
            self._dispatch(msg)
        return True

    def next_command(self) -> dict[str, Any] | None:
        """Block until the host sends a command (run, reset, shutdown); None on EOF."""
        while not self._commands:
            with self._read_lock:
                if self._commands:
                    break
                if not self.pump(block=True):
                    return None
        return self._commands.pop(0)

    def _wait(self, cid: int, fut: _Pending) -> Any:
        try:
            while not fut.done():
                if self._read_lock.acquire(timeout=0.005):
                    try:
                        if not fut.done() and not self.pump(block=True):
                            raise CodemodeError("the host closed the connection")
                    finally:
                        self._read_lock.release()
            try:
                return fut.result()
            except CodemodeError as exc:
                raise exc.with_traceback(None) from None  # no futures frames in tracebacks
        finally:
            self._waiting.pop(cid, None)

    def call(self, method: str, params: dict[str, Any]) -> Any:
        cid, fut = self._start_call(method, params)
        return self._wait(cid, fut)

    def call_async(self, method: str, params: dict[str, Any]) -> Awaitable[Any]:
        import asyncio

        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._start_call(method, params, future)
        if loop not in self._readers:
            self._readers.add(loop)
            loop.add_reader(self.fd_in, self._on_readable, loop)
        return future

    def _on_readable(self, loop: Any) -> None:
        if not self._read_lock.acquire(blocking=False):
            return
        try:
            alive = self.pump(block=False)
        finally:
            self._read_lock.release()
        if not alive or not self._waiting:
            loop.remove_reader(self.fd_in)
            self._readers.discard(loop)
            if not alive:
                for fut in list(self._waiting.values()):
                    fut.settle(error=CodemodeError("the host closed the connection"))
                self._waiting.clear()
