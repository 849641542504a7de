"""The ``"approval"`` config section (cheap to import: the CLI reads it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ApprovalConfig(BaseModel):
    """The ``"approval"`` section of the workspace's config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: float = Field(
        default=300.0, gt=0, description="Seconds to wait for a person; no answer refuses the call."
    )
    max_wait_per_run: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Seconds one run may spend in all waiting for answers (its timeout is held "
            "meanwhile); later questions of the run are refused. Default: three times timeout."
        ),
    )
    remember: bool = Field(
        default=True,
        description=(
            "Let a person's answer hold for the rest of the session: for the tool, or for "
            "the same argument values when a rule on arguments asked."
        ),
    )

    @property
    def run_wait_limit(self) -> float:
        """Without it, code asking again and again (new values each time) while nobody
        answers would keep its run alive indefinitely: each wait holds the run's timeout."""
        return self.max_wait_per_run if self.max_wait_per_run is not None else 3 * self.timeout


__all__ = ["ApprovalConfig"]
