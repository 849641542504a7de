"""What ``codemode serve`` does to its own process at start: log handlers that escape
what upstream servers say, the listening sockets, and a frozen start-up heap."""

from __future__ import annotations

import errno
import logging
import socket

from codemode.errors import CodemodeError


class PrintableLogs(logging.Filter):
    """Log records quote upstream servers (a failed server's stderr, its tool names, its
    errors): an escape sequence in them would reach the terminal ``serve`` runs in and
    could rewrite its lines or set its clipboard. Messages are shown escaped."""

    def filter(self, record: logging.LogRecord) -> bool:
        from codemode.cli import terminal_text

        message = record.getMessage()
        safe = terminal_text(message)
        if safe != message:
            record.msg, record.args = safe, None
        return True


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


def freeze_startup_heap() -> None:
    """Move everything built at start (modules, the SDK's models, the tool registry...)
    out of the garbage collector's reach: it lives as long as the server, and each full
    collection would otherwise scan all of it, stalling every client for tens of ms."""
    import gc

    gc.collect()
    gc.freeze()
