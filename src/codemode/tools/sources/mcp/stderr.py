"""What a failed server leaves behind, made into one redacted sentence for its error.

The child's stderr is drained into a bounded tail; exceptions (often nested groups from the
SDK's task groups) are flattened into ``Type: message`` leaves. Knows nothing of MCP.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable
from typing import TextIO

from codemode.redact import redact_text
from codemode_worker.bounds import keep_head

STDERR_TAIL_BYTES = 8192
TAIL_LINES = 5
TAIL_CHARS = 1_000


class StderrTail:
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


def with_tail(message: str, tail: str, lines: int = TAIL_LINES) -> str:
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


def leaf_errors(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaf_errors(sub)]
    return [exc]


def describe(exc: BaseException) -> str:
    leaves = leaf_errors(exc)
    return "; ".join(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__ for e in leaves)
