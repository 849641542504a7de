"""The ``output.write`` row of the worker -> host table (``codemode.rpc``, ``codemode.live``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .live import METHOD, Listening, deliver
from .rpc import Method, Params, Table


class ChunkParams(Params):
    stream: Literal["stdout", "stderr"] = Field(description="stdout or stderr.")
    text: str = Field(max_length=4_000_000, description="What was printed.")


class WriteParams(Params):
    chunks: list[ChunkParams] = Field(max_length=10_000, description="Chunks, in order.")


async def _write(session: Listening, p: WriteParams) -> dict[str, bool]:
    return await deliver(session.output_listener, ((c.stream, c.text) for c in p.chunks))


OUTPUT_METHODS: Table[Listening] = Table(
    Method(
        METHOD,
        WriteParams,
        _write,
        result='{"more": bool}',
        description="Output the run printed, sent while it runs (live output).",
    ),
)

__all__ = ["OUTPUT_METHODS", "ChunkParams", "WriteParams"]
