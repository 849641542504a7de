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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from .rpc import Method, Params, Table

if TYPE_CHECKING:
    from .session import Session

log = logging.getLogger("codemode.live")

Stream = Literal["stdout", "stderr"]
OnOutput = Callable[[str, str], Awaitable[None] | None]
"""``on_output(stream, text)``: called in order with each chunk a run prints."""


@dataclass(frozen=True, slots=True)
class OutputChunk:
    """One piece of a run's output, as ``Session.stream`` yields it."""

    stream: Stream
    text: str


class ChunkParams(Params):
    stream: Stream = Field(description="stdout or stderr.")
    text: str = Field(max_length=4_000_000, description="What was printed.")


class WriteParams(Params):
    chunks: list[ChunkParams] = Field(max_length=10_000, description="Chunks, in order.")


async def deliver(on_output: OnOutput | None, chunks: list[ChunkParams]) -> dict[str, bool]:
    """Hand ``chunks`` to ``on_output``; ``more`` says whether to keep sending."""
    if on_output is None:
        return {"more": False}
    try:
        for c in chunks:
            got = on_output(c.stream, c.text)
            if inspect.isawaitable(got):
                await got
    except Exception:
        log.exception("on_output failed; the rest of this run's output is not streamed")
        return {"more": False}
    return {"more": True}


async def _write(session: Session, p: WriteParams) -> dict[str, bool]:
    return await deliver(session.output_listener, p.chunks)


OUTPUT_METHODS: Table[Session] = Table(
    Method(
        "output.write",
        WriteParams,
        _write,
        result='{"more": bool}',
        description="Output the run printed, sent while it runs (live output).",
    ),
)


__all__ = ["OUTPUT_METHODS", "ChunkParams", "OnOutput", "OutputChunk", "Stream", "deliver"]
