"""The ``"approval"`` config section (cheap to import: the CLI reads it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ApprovalConfig(BaseModel):
    """The ``"approval"`` section of the workspace's config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: float = Field(
        default=300.0, gt=0, description="Seconds to wait for a person; no answer refuses the call."
    )
    remember: bool = Field(
        default=True,
        description=(
            "Let a person's answer hold for the rest of the session: for the tool, or for "
            "the same argument values when a rule on arguments asked."
        ),
    )


__all__ = ["ApprovalConfig"]
