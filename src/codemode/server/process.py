"""What ``codemode serve`` does to its own process at start: log handlers that escape
what upstream servers say, the listening sockets, and the garbage collector set up for serving."""

from __future__ import annotations

import errno
import logging
import socket

from codemode.errors import CodemodeError


class PrintableLogs(logging.Filter):
    """Log records quote upstream servers (a failed server's stderr, its tool names, its
    errors): an escape sequence in them would reach the terminal ``serve`` runs in and
    could rewrite its lines or set its clipboard. Messages are shown escaped, and so are
    a record's traceback and stack (an exception's message is quoted there as it is; the
    SDK's handler without ``rich`` prints it raw)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from codemode.cli import terminal_text

        message = record.getMessage()
        safe = terminal_text(message)
        if safe != message:
            record.msg, record.args = safe, None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = _FORMAT.formatException(record.exc_info)
        for name in ("exc_text", "stack_info"):
            text = getattr(record, name)
            if text:
                setattr(record, name, terminal_text(text))
        return True


_FORMAT = logging.Formatter()


def set_up_log_handlers(level: str) -> None:
    """The root handlers (set up by the MCP SDK's server) filter at ``level`` and escape."""
    for handler in logging.getLogger().handlers:
        # Some libraries set their own loggers to DEBUG (bm25s does): filter at the handlers.
        handler.setLevel(level)
        if not any(isinstance(f, PrintableLogs) for f in handler.filters):
            handler.addFilter(PrintableLogs())


def bind(host: str, port: int, option: str) -> socket.socket:
    from .http import bind_socket

    try:
        return bind_socket(host, port)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise CodemodeError(  # not a config mistake: exit status 1
            f"port {port} on {host} is already in use; choose another with "
            f"{option} N, or {option} 0 to pick a free one"
        ) from None


YOUNG_COLLECTION_THRESHOLD = 10_000
"""Net container allocations between two young collections in ``codemode serve``
(Python's default: 700)."""


def settle_collector() -> None:
    """Set the garbage collector up for serving, once started.

    Everything built at start (modules, the SDK's models, the tool registry...) is frozen
    out of its reach: it lives as long as the server, and each full collection would
    otherwise scan all of it, stalling every client for tens of ms.

    Young collections are made rarer: a request's objects (its tasks, streams, frames,
    the session it starts) are alive while it is in flight, so at 700 allocations a
    collection every couple of calls rescanned the in-flight requests of every client
    and promoted them to the older generations, which then needed full collections of
    their own (~50 ms each). Measured with 50 sessions x 40 calls in ``bench_load.py``
    (GC callbacks timing each collection's thread CPU, five runs): the collector took
    0.5-0.75 ms of CPU per call at 700 (a quarter of the server's), 0.26-0.34 ms at
    3,000, 10,000 and 20,000 alike (pauses of ~2, ~10 and ~25 ms), ~0.4 ms at 50,000
    with ~90 ms pauses. Cycles wait a little longer for their turn: at most 10,000
    objects more (a few MB).
    """
    import gc

    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    if young:  # 0: switched off by whoever embeds the server; leave it so
        gc.set_threshold(max(young, YOUNG_COLLECTION_THRESHOLD), middle, old)
