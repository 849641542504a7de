"""The seeds' tool names on ``codemode serve``: only in the ``all`` profile, so ``core``
(and ``minimal``) stay small."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..capability import Capability, NoConfig

if TYPE_CHECKING:
    from ..server.toolset import ServerContext, Toolset


def _server_tools(toolset: Toolset, ctx: ServerContext) -> None:
    from .server_tools import register

    register(toolset, ctx)


SEEDS = Capability(name="seeds", config=NoConfig, server_tools=_server_tools)
