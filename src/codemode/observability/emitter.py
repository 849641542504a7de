"""The tracing emitter: one thread per ``Tracing`` that, after runs have returned, builds
their spans (``Tracing._emit``) or hands them to the export process (``Tracing._ship``),
off the runs' critical path; and the flush at exit.

Why a module of its own: the loop is about when and how often that thread takes the GIL
(it rests after catching up, so a busy event loop hands it over once per batch), which
is apart from what a span holds (``tracing``, ``spans``).
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
import weakref
from typing import Any, Protocol


class _Closes(Protocol):
    def close(self, timeout: float = ...) -> None: ...


class Tracing(Protocol):
    """What the emitter needs of ``tracing.Tracing`` (a protocol: ``tracing`` imports this
    module, so this one cannot import it back)."""

    emitter_cpu: float

    @property
    def process(self) -> _Closes | None: ...

    def _ship(self, runs: list[Any]) -> None: ...

    def _emit(self, run: Any) -> None: ...

    def flush(self, timeout: float = ...) -> bool: ...


_Run = Any  # ``tracing._Run``: a finished run waiting for its spans

log = logging.getLogger("codemode.tracing")


EMITTER_REST = 0.01
"""Seconds the emitter rests after catching up: runs finished meanwhile are queued
without waking it, so a busy loop hands it the GIL once per batch, not once per run."""
EXPORT_REST = 0.2
"""The same when the spans go to an export process: handing a run over costs a few µs,
but each batch costs ~100 µs (waking up, a pipe write that wakes the other process),
so it waits for larger batches (``flush`` and ``close`` end the rest early)."""


def emit_loop(
    owner: weakref.ref[Tracing],
    pending: queue.SimpleQueue[_Run | threading.Event | None],
    rest: float,
    wake: threading.Event,
) -> None:
    while True:
        try:
            item = pending.get_nowait()
        except queue.Empty:
            wake.wait(rest)
            wake.clear()
            item = pending.get()
        runs: list[_Run] = []
        signal: threading.Event | bool | None = False  # False: caught up, no signal
        while True:  # what queued meanwhile, up to the next signal (an Event, or None)
            if item is None or isinstance(item, threading.Event):
                signal = item
                break
            runs.append(item)
            try:
                item = pending.get_nowait()
            except queue.Empty:
                break
        if runs and not _emit_runs(owner, runs):
            return
        if signal is None:
            return
        if isinstance(signal, threading.Event):
            signal.set()


def _emit_runs(owner: weakref.ref[Tracing], runs: list[_Run]) -> bool:
    """Build (or hand over) the spans of ``runs``; False once the tracing is gone."""
    tracing = owner()
    if tracing is None:
        return False
    if tracing.process is not None:  # one batch: a few µs a run, then a pipe write
        start = time.thread_time()
        tracing._ship(runs)
        tracing.emitter_cpu += time.thread_time() - start
        return True
    for run in runs:
        start = time.thread_time()
        try:
            tracing._emit(run)
        except Exception:  # a broken exporter must not stop the traces after it
            log.exception("could not emit the spans of a run")
        tracing.emitter_cpu += time.thread_time() - start
        # Hand the GIL to the event loop's thread if it waits: once per run, not per
        # span (each hand-off is two context switches, and a run's spans take ~0.1 ms).
        time.sleep(0)
    return True


live: weakref.WeakSet[Tracing] = weakref.WeakSet()
"""Tracings whose emitter has started: flushed at exit."""


def flush_all() -> None:
    """Emit the runs still pending, before a provider shuts its exporters down (and
    export processes theirs)."""
    for tracing in list(live):
        tracing.flush(2.0)
        if tracing.process is not None:
            tracing.process.close(2.0)


atexit.register(flush_all)  # for providers the SDK user shuts down themselves


__all__ = ["EMITTER_REST", "EXPORT_REST", "emit_loop", "flush_all", "live"]
