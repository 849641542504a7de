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
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .session import Session

log = logging.getLogger("codemode.live")

Stream = Literal["stdout", "stderr"]
OnOutput = Callable[[str, str], Awaitable[None] | None]
"""``on_output(stream, text)``: called in order with each chunk a run prints."""
METHOD = "output.write"


@dataclass(frozen=True, slots=True)
class OutputChunk:
    """One piece of a run's output, as ``Session.stream`` yields it."""

    stream: Stream
    text: str


async def deliver(on_output: OnOutput | None, chunks: Iterable[tuple[str, str]]) -> dict[str, bool]:
    """Hand ``(stream, text)`` chunks to ``on_output``; ``more`` says whether to keep sending."""
    if on_output is None:
        return {"more": False}
    try:
        for stream, text in chunks:
            got = on_output(stream, text)
            if inspect.isawaitable(got):
                await got
    except Exception:
        log.exception("on_output failed; the rest of this run's output is not streamed")
        return {"more": False}
    return {"more": True}


def handler(session: Session) -> Callable[[dict[str, Any]], Awaitable[Any]]:
    """The host handler of ``output.write`` for ``session`` (its params checked by the
    table row in ``codemode.live_rpc``, loaded on the first chunk)."""

    async def handle(params: dict[str, Any]) -> Any:
        from .live_rpc import OUTPUT_METHODS

        return await OUTPUT_METHODS[METHOD].call(session, params)

    return handle


__all__ = ["METHOD", "OnOutput", "OutputChunk", "Stream", "deliver", "handler"]
