"""The host's ends of a worker's pipes, with bounds a worker cannot push past.

- :class:`Inbox`: the worker's frames, read under :mod:`.frames`' rules, in order. A large
  frame is parsed on a thread while reading pauses; reading also pauses when the caller
  asks (too many calls in flight) and while the process's large-frame budget is short; a
  large frame that stops half-way ends the worker.
- :class:`Outbox`: frames for the worker's stdin, written without ever blocking the loop.
  What the worker does not read stays queued, up to a cap; past it the worker is stopped
  (a worker that asks for 30 MB artifacts and never reads the replies would otherwise
  grow the host without limit).
- :class:`RawOutput`: the worker's fd-level stdout and stderr (subprocesses,
  ``os.write(1, ...)``). Read only while a run is in progress (its output) and while the
  worker starts (stderr explains a failed start). Between runs nothing is read: a worker
  that floods its output then blocks on a full pipe, at no cost to the host.
"""

from __future__ import annotations

import asyncio
import os
import select
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from .frames import (
    FrameError,
    FrameLimits,
    FrameReader,
    LargeFrame,
    parse_large,
    parser_pool,
)

if TYPE_CHECKING:
    from .frame_schema import Frame

_TAIL = 4096
_READ = 1 << 16


STALL = 30.0
"""Seconds a large frame may stop half-way before its worker is stopped."""


class Inbox:
    def __init__(
        self,
        fd: int,
        limits: FrameLimits,
        *,
        on_frame: Callable[[Frame], None],
        on_error: Callable[[str], None],
        on_eof: Callable[[], None],
    ) -> None:
        self.fd = fd
        self.limits = limits
        self._reader = FrameReader(fd, limits, self._budget_freed)
        self._on_frame = on_frame
        self._on_error = on_error
        self._on_eof = on_eof
        self._loop: asyncio.AbstractEventLoop | None = None
        self._paused: set[str] = set()  # why the pipe is not being read
        self._watchdog: asyncio.TimerHandle | None = None
        self._closed = False
        os.set_blocking(fd, False)

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        loop.add_reader(self.fd, self._on_readable)

    def read_now(self) -> None:
        """Take what the pipe already holds, as the reader callback would (no wait)."""
        if not self._paused and not self._closed and self._loop is not None:
            self._on_readable()

    def pause(self, why: str) -> None:
        if not self._paused and not self._closed and self._loop is not None:
            self._loop.remove_reader(self.fd)
        self._paused.add(why)

    def resume(self, why: str) -> None:
        if why not in self._paused:
            return
        self._paused.discard(why)
        if not self._paused and not self._closed and self._loop is not None:
            self._loop.add_reader(self.fd, self._on_readable)

    def close(self) -> None:
        """Stop reading for good (the worker is gone); give back any budget held."""
        if self._closed:
            return
        self.pause("closed")
        self._closed = True
        self._reader.release()
        if self._watchdog is not None:
            self._watchdog.cancel()

    def _violation(self, exc: Exception) -> None:
        self._on_error(f"the worker sent a malformed message ({exc}); it was stopped")

    def _on_readable(self) -> None:
        try:
            items = self._reader.read()
        except FrameError as exc:
            self._violation(exc)
            return
        except BlockingIOError:
            return
        except OSError:
            items = None
        if items is None:
            self.pause("eof")
            self._on_eof()
            return
        if self._reader.mid_frame and self._watchdog is None:
            assert self._loop is not None
            self._watchdog = self._loop.call_later(STALL, self._watch, self._reader.progress)
        self._take(items)

    def _watch(self, seen: int) -> None:
        """A large frame must keep coming: one begun and left unfinished would hold its
        share of the process's large-frame budget (and its memory) for ever."""
        self._watchdog = None
        if self._closed or not self._reader.mid_frame:
            return
        if self._reader.progress == seen:
            self._on_error(f"the worker sent part of a frame and nothing more for {STALL:g} s")
            return
        assert self._loop is not None
        self._watchdog = self._loop.call_later(STALL, self._watch, self._reader.progress)

    def _budget_freed(self) -> None:
        """Another worker's large frame is done (called from any thread)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._retry_large)

    def _retry_large(self) -> None:
        if self._closed or not self._reader.waiting:
            return
        try:
            items = self._reader.buffered()
        except FrameError as exc:
            self._violation(exc)
            return
        if not self._reader.waiting:
            self.resume("budget")
        self._take(items)

    def _take(self, items: list[Frame | LargeFrame]) -> None:
        """Hand frames on in order; a large one is parsed on a thread, reading paused."""
        if self._reader.waiting:
            self.pause("budget")  # the rest waits for the process's large-frame budget
        for item in items:
            if self._closed:
                if isinstance(item, LargeFrame):
                    item.release()
                continue
            if isinstance(item, LargeFrame):
                self.pause("parse")
                assert self._loop is not None
                fut = self._loop.run_in_executor(parser_pool(), parse_large, item, self.limits)
                fut.add_done_callback(self._on_parsed)
                return
            try:
                self._on_frame(item)
            except FrameError as exc:
                self._violation(exc)

    def _on_parsed(self, fut: asyncio.Future[Frame]) -> None:
        if fut.cancelled() or self._closed:
            return
        try:
            self._on_frame(fut.result())
            items = self._reader.buffered()
        except FrameError as exc:
            self._violation(exc)
            return
        except Exception as exc:  # noqa: BLE001 - e.g. MemoryError while parsing
            self._on_error(f"a frame from the worker could not be read ({exc!r}); it was stopped")
            return
        self.resume("parse")
        self._take(items)


class OutboxFull(Exception):
    """More bytes are queued for the worker than its cap allows."""


class Outbox:
    def __init__(self, fd: int, cap: int) -> None:
        self.fd = fd
        self.cap = cap
        self.queued = 0
        self._chunks: deque[memoryview] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writing = False  # a writer is registered on the loop
        os.set_blocking(fd, False)

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def send(self, parts: list[bytes | bytearray | memoryview]) -> None:
        """Write a frame (its buffers, in order) now, or queue what the pipe does not take.

        Buffers are queued as they are, never copied. A frame is always accepted while
        nothing is queued (it exists already); beyond that, queueing past ``cap`` raises
        :class:`OutboxFull`.
        """
        size = sum(len(p) for p in parts)
        if self._chunks and self.queued + size > self.cap:
            raise OutboxFull(self.queued + size)
        waiting = bool(self._chunks)
        self._chunks.extend(memoryview(p) for p in parts)
        self.queued += size
        if not waiting:
            self._flush()
            if self._chunks:
                assert self._loop is not None
                self._loop.add_writer(self.fd, self._flush)
                self._writing = True

    def _flush(self) -> None:
        while self._chunks:
            head = self._chunks[0]
            try:
                n = os.write(self.fd, head)
            except BlockingIOError:
                return
            except OSError:
                self.close()  # the worker is gone; its exit is reported by the pidfd reader
                return
            self.queued -= n
            if n < len(head):
                self._chunks[0] = head[n:]
                return
            self._chunks.popleft()
        if self._loop is not None and self._writing:
            self._loop.remove_writer(self.fd)
            self._writing = False

    def close(self) -> None:
        """Drop what is queued (the worker is gone)."""
        if self._loop is not None and self._writing:
            self._loop.remove_writer(self.fd)
            self._writing = False
        self._chunks.clear()
        self.queued = 0


class RawOutput:
    """stdout and stderr of one worker at the fd level: captured per run, bounded."""

    def __init__(self, out_fd: int, err_fd: int, max_output: int) -> None:
        self.fds = (out_fd, err_fd)
        self.max_output = max_output
        self.err_tail = bytearray()
        self._run: tuple[bytearray, bytearray] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listening: set[int] = set()
        self._eof: set[int] = set()
        self._idle = False
        self._poll = select.poll()  # no fd-number ceiling, unlike select()
        for fd in self.fds:
            os.set_blocking(fd, False)
            self._poll.register(fd, select.POLLIN)

    def listen(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read both pipes (while the worker starts, and during runs)."""
        self._loop = loop
        self._idle = False
        for index, fd in enumerate(self.fds):
            if fd not in self._listening and fd not in self._eof:
                loop.add_reader(fd, self._on_readable, index)
                self._listening.add(fd)

    def idle(self) -> None:
        """Stop reading until the next run. Lazily: a pipe's reader is removed when output
        arrives between runs, so a quiet worker costs no add/remove per run."""
        self._idle = True

    def begin_run(self) -> None:
        """Drop what was written between runs, then capture the run's output."""
        if len(self._listening) + len(self._eof) < len(self.fds):  # a pipe was left unread
            self._drain(keep=False)
        self._run = (bytearray(), bytearray())
        assert self._loop is not None
        self.listen(self._loop)

    def end_run(self) -> tuple[bytearray, bytearray]:
        """What the run wrote (read up to now, bounded); then the pipes go idle."""
        self._drain(keep=True)
        run, self._run = self._run, None
        self.idle()
        return run if run is not None else (bytearray(), bytearray())

    def tail(self) -> str:
        """The end of stderr (why a worker failed), including what is still in the pipe."""
        self._drain(keep=True)
        return self.err_tail.decode("utf-8", "replace").strip()

    def _on_readable(self, index: int) -> None:
        if self._idle:  # output between runs: leave it in the pipe, where it blocks its writer
            self._unwatch(self.fds[index])
            return
        data = self._read(index)
        if data:
            self._keep(index, data)

    def _unwatch(self, fd: int) -> None:
        if fd in self._listening:
            self._listening.discard(fd)
            assert self._loop is not None
            self._loop.remove_reader(fd)

    def _read(self, index: int) -> bytes | None:
        """What the pipe holds now (None: nothing yet; empty: it ended)."""
        fd = self.fds[index]
        try:
            data = os.read(fd, _READ)
        except BlockingIOError:
            return None
        except OSError:
            data = b""
        if not data:
            self._eof.add(fd)
            self._unwatch(fd)
        return data

    def _keep(self, index: int, data: bytes, *, for_run: bool = True) -> None:
        if index == 1:
            self.err_tail += data
            del self.err_tail[:-_TAIL]
        if for_run and self._run is not None:
            buf = self._run[index]
            room = self.max_output - len(buf)
            if room > 0:
                buf += data[:room]

    def _drain(self, *, keep: bool) -> None:
        """Read what is in the pipes now, without waiting and without end: a background
        thread may keep writing, so stop after ``max_output`` plus one pipe's worth."""
        if not self._poll.poll(0):
            return  # the common case: nothing there (one syscall for both pipes)
        for index, fd in enumerate(self.fds):
            budget = self.max_output + (1 << 20)
            while budget > 0 and fd not in self._eof:
                data = self._read(index)
                if not data:
                    break
                budget -= len(data)
                self._keep(index, data, for_run=keep)

    def close(self) -> None:
        for fd in list(self._listening):
            self._unwatch(fd)
        self._run = None
