"""Live output on the host: the ``output.write`` row of the worker -> host table.

The worker sends what a run prints while it runs (``codemode_worker.live``: the first
chunk after a quiet spell at once, later ones coalesced for at most 50 ms, only the part
the output limit keeps). ``Session`` routes each chunk to the ``on_output`` callback of
the run in progress and answers whether anyone listens, so a run without a listener
stops sending after its first chunk. Every chunk arrives before the run's result.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

log = logging.getLogger("codemode.live")

Stream = Literal["stdout", "stderr"]
OnOutput = Callable[[str, str], Awaitable[bool | None] | bool | None]
"""``on_output(stream, text)``: called in order with each chunk a run prints; returning
``False`` stops the rest of the run's chunks."""
METHOD = "output.write"


@dataclass(frozen=True, slots=True)
class OutputChunk:
    """One piece of a run's output, as ``Session.stream`` yields it."""

    stream: Stream
    text: str


class Listener:
    """A run's ``on_output`` with what is left of its output limit, per stream.

    The worker already sends only what its capture keeps; this bound holds against code
    that calls ``output.write`` itself, so the listener never gets more than the limit.
    """

    __slots__ = ("left", "on_output")

    def __init__(self, on_output: OnOutput, limit: int) -> None:
        self.on_output = on_output
        self.left = {"stdout": limit, "stderr": limit}


async def deliver(listener: Listener | None, chunks: Iterable[tuple[str, str]]) -> dict[str, bool]:
    """Hand ``(stream, text)`` chunks to the listener; ``more`` says whether to keep sending."""
    if listener is None:
        return {"more": False}
    try:
        for stream, text in chunks:
            left = listener.left.get(stream, 0)
            if left <= 0:
                return {"more": False}
            text = text[:left]
            listener.left[stream] = left - len(text)
            got = listener.on_output(stream, text)
            if inspect.isawaitable(got):
                got = await got
            if got is False:  # the listener has had enough
                return {"more": False}
    except Exception:
        log.exception("on_output failed; the rest of this run's output is not streamed")
        return {"more": False}
    return {"more": True}


class Listening(Protocol):
    """What ``output.write`` needs of a session: the running run's listener."""

    output_listener: Listener | None


def handler(session: Listening) -> Callable[[dict[str, Any]], Awaitable[Any]]:
    """The host handler of ``output.write`` for ``session`` (its params checked by the
    table row in ``codemode.live_rpc``, loaded on the first chunk)."""

    async def handle(params: dict[str, Any]) -> Any:
        from .live_rpc import OUTPUT_METHODS

        return await OUTPUT_METHODS[METHOD].call(session, params)

    return handle


__all__ = ["METHOD", "Listener", "OnOutput", "OutputChunk", "Stream", "deliver", "handler"]
