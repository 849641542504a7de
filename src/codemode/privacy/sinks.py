"""Which tools receive real values (sinks) and which tools' results are scanned.

By default every server is a sink except one given a path inside the workspace (in its
arguments, working directory or environment) and a tool that works in it (a declared
command-line tool, whose working directory is ``files/``): a real value written there, even as a
file name such as ``/workspace/[EMAIL_...]`` resolved on the host, would come back into
the sandbox, which sees the workspace's ``files/``. A filesystem server given
``<workspace>/files`` is therefore not a sink; it receives tokens, and writes tokens.
``privacy.servers.<name>.sink`` (and ``.tools.<glob>.sink``) overrides either way, e.g.
``false`` for a server marked as external that must never see real values.

Every tool's results are scanned unless ``privacy.servers.<name>.scan`` is ``false``.
Tools that are not upstream MCP servers (Python callables registered on the session)
are sinks: they are the application's own code, on the host.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..isolation.paths import touches_workspace
from .config import PrivacyConfig

if TYPE_CHECKING:
    from codemode.config import ServerConfig

__all__ = ["SinkPolicy", "touches_workspace"]


class SinkPolicy:
    def __init__(
        self,
        config: PrivacyConfig,
        servers: Mapping[str, ServerConfig],
        workspace: Path | None,
    ) -> None:
        self.config = config
        self._inside: dict[str, bool] = {}
        if workspace is not None:
            for name, server in servers.items():
                self._inside[name] = touches_workspace(server, workspace)

    def is_sink(self, server: str, tool: str, *names: str, in_workspace: bool = False) -> bool:
        """``names``: the call's other ``server.tool`` names (``ToolSpec.names``);
        ``in_workspace``: the tool works in the workspace (``ToolSpec.in_workspace``)."""
        sink, _ = self.config.policy(server, tool, *names)
        if sink is not None:
            return sink
        return not (in_workspace or self._inside.get(server, False))

    def scans(self, server: str, tool: str, *names: str) -> bool:
        _, scan = self.config.policy(server, tool, *names)
        return True if scan is None else scan

    def describe(self) -> dict[str, bool]:
        """Server -> sink, for ``codemode privacy status``."""
        return {name: self.is_sink(name, "") for name in self._inside}
