"""A plugin that is a plain Capability: a config section and a run hook."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from codemode import Capability, ExecutionResult
from codemode.result import ErrorInfo


class StampConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    refuse: str = "FORBIDDEN"


def hooks(config: StampConfig) -> Any:
    async def guard(event: Any, call_next: Any) -> ExecutionResult:
        if config.refuse in event.code:
            return ExecutionResult(error=ErrorInfo("Refused", f"{config.refuse} is refused"))
        return await call_next(event)

    yield "checks", guard


STAMP = Capability(name="stampcap", config=StampConfig, run_hooks=hooks)
