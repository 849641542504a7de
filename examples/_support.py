"""What the runnable examples share: a throwaway workspace wired to real MCP servers.

The servers are the ones ``bash scripts/setup.sh`` installs (the npm filesystem, memory and
everything servers under ``.ci/node``, the PyPI time server under ``.ci/venvs``) and the
small servers of codemode's own tests (``tests/fixtures/servers``). Nothing here reaches
the network.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from codemode import ExecutionResult, Session

REPO = Path(__file__).resolve().parent.parent
NPM = REPO / ".ci" / "node" / "node_modules" / "@modelcontextprotocol"
PYPI = REPO / ".ci" / "venvs"
FIXTURES = REPO / "tests" / "fixtures" / "servers"
SETUP_HINT = "run `bash scripts/setup.sh` first (it installs the MCP servers the examples use)"
COLOR = sys.stdout.isatty()


def npm_server(package: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """An ``mcpServers`` entry for one of the npm servers (``server-filesystem``...)."""
    entry = NPM / package / "dist" / "index.js"
    if not entry.exists():
        sys.exit(f"{entry} is missing: {SETUP_HINT}")
    return {"command": "node", "args": [str(entry), *args], **({"env": env} if env else {})}


def time_server() -> dict[str, Any]:
    """The PyPI ``mcp-server-time``, installed in a venv of its own."""
    python = PYPI / "mcp-server-time" / "bin" / "python"
    if not python.exists():
        sys.exit(f"{python} is missing: {SETUP_HINT}")
    return {"command": str(python), "args": ["-m", "mcp_server_time"]}


def fixture_server(script: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One of the tests' own servers (``crm_server.py``, ``outbox_server.py``...)."""
    entry = {"command": sys.executable, "args": [str(FIXTURES / script)]}
    return entry | ({"env": env} if env else {})


@contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A temporary folder, readable by the sandbox's unprivileged uid, removed at the end."""
    root = Path(tempfile.mkdtemp(prefix=f"codemode-{prefix}-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def make_workspace(
    root: Path, servers: dict[str, dict[str, Any]], config: dict[str, Any] | None = None
) -> Path:
    """``root/workspace`` with this ``mcp.json`` (and ``config.json``, when given)."""
    base = root / "workspace"
    (base / "files").mkdir(parents=True, exist_ok=True)
    (base / "mcp.json").write_text(json.dumps({"mcpServers": servers}, indent=2))
    if config is not None:
        (base / "config.json").write_text(json.dumps(config, indent=2))
    return base


def banner(text: str) -> None:
    print(f"\n\033[1;36m== {text}\033[0m" if COLOR else f"\n== {text}", flush=True)


def dim(text: str) -> str:
    return f"\033[2m{text}\033[0m" if COLOR else text


async def show(
    session: Session, code: str, timeout: float = 60, *, check: bool = True
) -> ExecutionResult:
    """Run ``code`` and print it with what the model would be shown; with ``check``, stop
    the example when the code fails."""
    print(dim(textwrap.indent(code.strip(), "  >>> ")))
    result = await session.run(code, timeout=timeout)
    print(textwrap.indent(result.to_text(), "  "), flush=True)
    if check and not result.is_ok:
        raise SystemExit(f"\nthe example's code failed: {result.error}")
    return result
