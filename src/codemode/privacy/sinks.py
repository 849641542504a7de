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

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .config import PrivacyConfig

if TYPE_CHECKING:
    from codemode.config import ServerConfig

__all__ = ["SinkPolicy", "touches_workspace"]

_WORDS = re.compile(r"[\s=:,;\"'\[\](){}]+")
"""What separates paths in a server's arguments and environment: ``--dir=/a``, ``PATH``
style ``/a:/b``, lists ``/a,/b`` or ``/a;/b``, JSON ``["/a", "/b"]``."""


def touches_workspace(server: ServerConfig, workspace: Path) -> bool:
    """Whether ``server`` is given a path inside ``workspace`` (args, cwd or env)."""
    values: list[str] = []
    values.extend(getattr(server, "args", ()) or ())
    cwd = getattr(server, "cwd", None)
    if cwd:
        values.append(cwd)
    values.extend((getattr(server, "env", None) or {}).values())
    root = workspace.resolve()
    base = Path(cwd) if cwd else Path.cwd()  # where the server's relative paths lead
    for raw in values:
        for part in _WORDS.split(str(raw)):
            # A bare word (``files``, ``data/out``) is a path only if it names one that exists
            # where the server starts: ``stdio`` or ``--port`` are not paths.
            marked = part.startswith(("/", "~", "."))
            if not part or (not marked and (part.startswith("-") or "://" in part)):
                continue
            try:
                path = Path(part).expanduser()
                if not path.is_absolute():
                    path = base / path
                if not marked and not path.exists():
                    continue
                path = path.resolve()
            except (OSError, RuntimeError, ValueError):
                continue
            if path == root or root in path.parents or path in root.parents:
                return True
    return False


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
