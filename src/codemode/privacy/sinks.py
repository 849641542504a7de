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

_WORDS = re.compile(r"[\s=:,;]+")
"""Where one path of an argument or variable ends: ``--root=a``, ``PATH``'s ``a:b``,
lists written ``a,b`` or ``a;b``, a JSON object's ``"key": "value"``."""
_QUOTES = "\"'`()[]{}<>"


def touches_workspace(server: ServerConfig, workspace: Path) -> bool:
    """Whether ``server`` is given a path inside ``workspace`` (args, cwd or env).

    Inside means where the sandbox's view leads: the workspace and its ``files``, each
    followed through symlinks (a ``files`` that links elsewhere puts that place in the
    sandbox's view), so a server given either name of it writes into the sandbox."""
    here = Path.cwd()  # where codemode runs: a relative ``cwd`` starts from it
    cwd = getattr(server, "cwd", None)
    base = here / Path(cwd).expanduser() if cwd else here  # the server's relative paths
    values: list[tuple[str, Path]] = [(str(a), base) for a in getattr(server, "args", ()) or ()]
    if cwd:
        values.append((cwd, here))
    values.extend((str(v), base) for v in (getattr(server, "env", None) or {}).values())
    roots = {workspace.resolve(), (workspace / "files").resolve()}
    for raw, start in values:
        # The whole value (a path may hold a comma or a space), then each of its words.
        for word in (raw, *_WORDS.split(raw)):
            part = word.strip(_QUOTES)
            # A bare word (``files``, ``files/exports``) is a path only if its first step
            # exists where the server starts (what follows may be made by the server
            # later): ``stdio`` or ``--port`` are not paths.
            marked = part.startswith(("/", "~", "."))
            if not marked and part.startswith("-"):
                continue
            try:
                path = Path(part).expanduser()
                if not marked and not (start / path.parts[0]).exists():
                    continue
                path = (start / path).resolve()  # start is ignored for an absolute path
            except (OSError, RuntimeError, ValueError, IndexError):
                continue
            if any(path == root or root in path.parents or path in root.parents for root in roots):
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
