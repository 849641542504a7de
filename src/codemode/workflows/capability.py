"""Workflows as a capability: the ``workflows`` config section, ``codemode workflow``,
and the ``run_workflow`` tool on ``codemode serve``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from ..capability import Capability

if TYPE_CHECKING:
    import click

    from ..server.toolset import ServerContext, Toolset


class WorkflowsConfig(BaseModel):
    """The ``workflows`` section."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trusted_servers: tuple[str, ...] = Field(
        (),
        description="MCP servers whose idempotentHint/readOnlyHint annotations resume may "
        "trust to re-run a call that started but did not finish.",
    )
    fsync: bool = Field(
        False, description="fsync the journal after each event (survives a machine crash)."
    )
    max_journal_mb: float = Field(
        256,
        gt=0,
        description="Most MB one run's journal file may hold (its steps' outputs); a run "
        "that would write more fails, saying so. Journals are not in the memory quota.",
    )


def _command(name: str) -> click.Command:
    from .cli import workflow

    return workflow


def _server_tools(toolset: Toolset, ctx: ServerContext) -> None:
    from .server_tools import register

    register(toolset, ctx)


WORKFLOWS = Capability(
    name="workflows",
    config=WorkflowsConfig,
    commands={"workflow": "Run, validate, resume and list workflows (YAML/JSON)."},
    command=_command,
    server_tools=_server_tools,
)
