"""The log filter of ``codemode serve`` escapes every part of a record a handler prints."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from codemode.server.process import PrintableLogs

PLANTED = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\r\x9b2J"


@pytest.fixture
def printed() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger behind the handler the MCP SDK installs when ``rich`` is not there."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(PrintableLogs())
    logger = logging.getLogger("codemode.test.printable")
    logger.addHandler(handler)
    logger.propagate = False
    yield logger, out
    logger.removeHandler(handler)


def _raw(text: str) -> bool:
    return any(c in text for c in "\x1b\x07\r\x9b")


def test_a_traceback_quoting_an_upstream_message_is_printed_escaped(
    printed: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = printed
    try:
        raise ValueError("upstream said " + PLANTED)
    except ValueError:
        logger.exception("host handler failed: %s", PLANTED)
    text = out.getvalue()
    assert "upstream said" in text and "]52;c;" in text and "Traceback" in text
    assert not _raw(text), repr(text)


def test_a_stack_is_printed_escaped(printed: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = printed
    logger.warning("look", stack_info=True, extra={"ignored": PLANTED})
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "m", None, None)
    record.stack_info = "Stack (most recent call last):\n  " + PLANTED
    logger.handle(record)
    assert "]52;c;" in out.getvalue() and not _raw(out.getvalue())
