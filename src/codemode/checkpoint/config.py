"""The ``checkpoint`` config section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class CheckpointConfig(BaseModel):
    """When sessions save their namespace to storage, and how much they may save."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    auto: bool = Field(
        False,
        description="Checkpoint each session's variables after every run, so a worker "
        "crash or an eviction costs at most the last run.",
    )
    max_mb: int = Field(256, ge=1, le=1024, description="Largest checkpoint, in MB (pickled size).")
    keep_hours: float = Field(
        168.0,
        ge=0,
        description="Delete checkpoints not written for this long (sessions that never "
        "came back); 0: keep them.",
    )
    timeout: float = Field(300.0, gt=0, description="Seconds a checkpoint or a restore may take.")
