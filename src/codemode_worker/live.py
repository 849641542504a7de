"""Live output: what a run prints, sent to the host while the run goes on.

The kept part of each write (what the run's result will also hold, so the output limit
applies alike) is queued; a flusher thread sends it with the ``output.write`` host call.
The first chunk after a quiet spell goes at once; later ones wait until ``COALESCE``
after the previous send, so a loop of prints costs at most ~20 calls a second. The host
answers whether anyone listens; when nobody does, the rest of the run sends nothing.
Before a run's result is sent, ``end`` sends what is left, so every chunk comes first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from . import bridge, protocol

COALESCE = 0.05
"""Seconds later chunks wait for more output to join them."""
STREAMS = ("stdout", "stderr")


class LiveOutput:
    """One worker's sender; ``begin``/``end`` bracket each run (on the run's thread)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: list[tuple[int, str]] = []
        self._adopt: Callable[[], None] | None = None
        self._enabled = False
        self._sending = False
        self._last = 0.0
        self._thread: threading.Thread | None = None

    def begin(self, adopt: Callable[[], None]) -> None:
        """Start a run; ``adopt`` (``bridge.share_link()``) lets the flusher reach the host."""
        with self._cond:
            self._adopt = adopt
            self._pending.clear()
            self._enabled = True
            self._last = 0.0
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="codemode-live", daemon=True)
            self._thread.start()

    def write(self, index: int, text: str) -> None:
        if not text or not self._enabled:
            return
        with self._cond:
            if self._enabled:
                self._pending.append((index, text))
                self._cond.notify()

    def end(self, wait: float = 5.0) -> None:
        """Send what is left (after any send in flight); then stop until ``begin``."""
        try:
            with self._cond:
                deadline = time.monotonic() + wait
                while self._sending and time.monotonic() < deadline:
                    self._cond.wait(deadline - time.monotonic())
                chunks, self._pending = self._pending, []
                enabled = self._enabled
                self._enabled = False
                self._adopt = None
            if chunks and enabled:
                _send(chunks)
        except KeyboardInterrupt:  # an interrupt while finishing: the result still goes
            pass

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self._pending and self._enabled):
                    self._cond.wait()
                deadline = self._last + COALESCE  # past already after a quiet spell
                while (delay := deadline - time.monotonic()) > 0:
                    self._cond.wait(delay)  # let more output join this chunk
                if not (self._pending and self._enabled):
                    continue  # ``end`` took it meanwhile
                chunks, self._pending = self._pending, []
                adopt = self._adopt
                self._sending = True
            more = True
            try:
                if adopt is not None:
                    adopt()
                    more = _send(chunks)
            finally:
                with self._cond:
                    self._sending = False
                    self._last = time.monotonic()
                    if not more:
                        self._enabled = False
                        self._pending.clear()
                    self._cond.notify_all()


def _send(chunks: list[tuple[int, str]]) -> bool:
    """Send ``chunks`` (joined per stream, in order); False when nobody listens."""
    merged: list[dict[str, str]] = []
    for index, raw in chunks:
        text = protocol.without_surrogates(raw)  # shown, like the result's output
        if merged and merged[-1]["stream"] == STREAMS[index]:
            merged[-1]["text"] += text
        else:
            merged.append({"stream": STREAMS[index], "text": text})
    try:
        reply = bridge.call("output.write", {"chunks": merged})
    except Exception:  # noqa: BLE001 - a host without live output: stop quietly
        return False
    return bool(isinstance(reply, dict) and reply.get("more"))
