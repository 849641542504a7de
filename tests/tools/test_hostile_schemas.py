"""An upstream server's schemas cannot turn the host's argument and result checks against
it: no URL is fetched for a ``$ref``, no server regex backtracks on the event loop, and a
check that recurses without end refuses the call instead of sending it unchecked."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from schema_host import schema_listener

from codemode.errors import ToolArgumentError
from codemode.workspace import Workspace

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "hostile_server.py"


def workspace(tmp_path: Path, *args: str) -> Path:
    servers = {"hostile": {"command": sys.executable, "args": [str(HOSTILE), *args]}}
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return tmp_path


@pytest.fixture
def listener() -> Iterator[tuple[str, list[str]]]:
    """A URL on loopback and the paths requested from it."""
    with schema_listener("/latest/meta-data", "the-secret-behind-the-firewall") as found:
        yield found


@pytest.mark.anyio
async def test_a_remote_ref_in_a_schema_is_never_fetched_by_the_host(
    tmp_path: Path, listener: tuple[str, list[str]]
) -> None:
    url, hits = listener
    async with Workspace.open(workspace(tmp_path, url)).registry() as reg:
        assert await reg.call("hostile", "remote_ref", {"a": 1}) == "ok"
    assert hits == []


@pytest.mark.anyio
async def test_a_ref_that_does_not_resolve_leaves_only_its_value_to_the_server(
    tmp_path: Path, listener: tuple[str, list[str]]
) -> None:
    url, _ = listener
    async with Workspace.open(workspace(tmp_path, url)).registry() as reg:
        assert await reg.call("hostile", "remote_ref", {"a": 1, "n": 2}) == "ok"
        with pytest.raises(ToolArgumentError, match="argument 'n': expected integer"):
            await reg.call("hostile", "remote_ref", {"a": 1, "n": "two"})


@pytest.mark.anyio
async def test_a_schema_that_is_its_own_ref_refuses_the_call(tmp_path: Path) -> None:
    async with Workspace.open(workspace(tmp_path)).registry() as reg:
        with pytest.raises(ToolArgumentError, match="refers to itself without end"):
            await reg.call("hostile", "self_ref", {"a": 1})


def nested(depth: int) -> dict[str, object]:
    tree: dict[str, object] = {"n": 0}
    for _ in range(depth):
        tree = {"child": tree}
    return tree


@pytest.mark.anyio
async def test_arguments_too_deep_to_check_are_refused_and_later_calls_still_checked(
    tmp_path: Path,
) -> None:
    async with Workspace.open(workspace(tmp_path)).registry() as reg:
        assert await reg.call("hostile", "tree", nested(5)) == "ok"
        with pytest.raises(ToolArgumentError, match="nested too deeply"):
            await reg.call("hostile", "tree", nested(400))
        with pytest.raises(ToolArgumentError, match="argument 'n': expected integer"):
            await reg.call("hostile", "tree", {"n": "x"})


CALLS = """
import asyncio, sys
from codemode.errors import ToolArgumentError
from codemode.workspace import Workspace

async def main():
    async with Workspace.open(sys.argv[1]).registry() as reg:
        print(await reg.call("hostile", "redos_out", {}), flush=True)
        print(await reg.call("hostile", "redos_in", {"s": "a" * 40 + "!"}), flush=True)

asyncio.run(main())
"""


def test_a_server_s_regular_expressions_never_run_on_the_host(tmp_path: Path) -> None:
    # The host's checks are synchronous: a backtracking regex would hold its event loop
    # (every session of a serve process) for hours, so the calls run in a child process.
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CALLS, str(workspace(tmp_path))],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"a server's pattern stalled the host: {exc.stdout!r}")
    assert proc.stdout.splitlines() == [repr({"s": "a" * 40 + "!"}), "ok"], proc.stderr
