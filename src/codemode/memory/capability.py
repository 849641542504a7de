"""The memory as a capability: its config section, CLI groups and ``codemode serve`` tools.

Cheap to import: the groups and tools are imported when they are used.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..capability import Capability

if TYPE_CHECKING:
    import click

    from ..server.toolset import ServerContext, Toolset


class MemoryConfig(BaseModel):
    """The ``memory`` section: packages for the agent's code (``deps/``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allow_runtime_deps: bool = Field(True, description="Let agents' code add packages.")
    allow_source_builds: bool = Field(
        False, description="Removed: codemode installs wheels only (must stay false)."
    )
    deps: tuple[str, ...] = Field((), description="Packages the workspace always has.")
    install_deps: bool = Field(False, description="Install missing `deps` when a session opens.")
    deps_index_url: str | None = Field(
        None, description="Package index for deps (http(s)); default: the system's, or PyPI."
    )
    quota_mb: int = Field(
        512, ge=0, description="Bytes of artifacts, state and skills together; 0: no limit."
    )
    deps_quota_mb: int = Field(
        2048,
        ge=0,
        description="Disk the deps directory may use, pip's downloads counted as they come; "
        "0: no limit.",
    )
    quota_records: int = Field(
        20_000, ge=0, description="Artifacts, skill versions and state records; 0: no limit."
    )

    @field_validator("allow_source_builds")
    @classmethod
    def _no_source_builds(cls, v: bool) -> bool:
        if v:
            raise ValueError(
                "codemode never builds packages from source (a build runs the package's own "
                "code); install wheels only, or publish a wheel to your index"
            )
        return v

    @field_validator("deps_index_url")
    @classmethod
    def _http_index(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^/\s]+", v):
            raise ValueError(f"must be an http:// or https:// URL, got {v!r}")
        return v


# Before sections these were top-level settings: the old keys and variables still work.
_OLD_NAMES = ("allow_runtime_deps", "allow_source_builds", "deps", "install_deps")
_QUOTA_NAMES = {"memory_quota_mb": "quota_mb", "memory_quota_records": "quota_records"}

COMMANDS = {
    "skills": "Manage saved skills.",
    "artifacts": "Manage saved artifacts.",
    "state": "Read and change the workspace's state.",
    "deps": "Manage packages installed for the sandbox.",
}


def _command(name: str) -> click.Command:
    from . import cli

    groups: dict[str, click.Command] = {
        "skills": cli.skills,
        "artifacts": cli.artifacts,
        "state": cli.state,
        "deps": cli.deps,
    }
    return groups[name]


def _server_tools(toolset: Toolset, ctx: ServerContext) -> None:
    from .server_tools import register

    register(toolset, ctx)


MEMORY = Capability(
    name="memory",
    config=MemoryConfig,
    env_aliases={name: (f"CODEMODE_{name.upper()}",) for name in _OLD_NAMES},
    key_aliases={name: name for name in _OLD_NAMES} | _QUOTA_NAMES,
    commands=COMMANDS,
    command=_command,
    server_tools=_server_tools,
)
