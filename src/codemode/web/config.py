"""The ``web`` config section: whether ``serve --transport http`` has a console."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class WebConfig(BaseModel):
    """On by default: the console shows only what the server's token may already see."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    console: bool = Field(
        default=True,
        description="Serve the read-only web console at /ui (data behind the server's token).",
    )
    recent_runs: int = Field(
        default=50, ge=1, le=1000, description="Runs the console keeps and shows, newest first."
    )


__all__ = ["WebConfig"]
