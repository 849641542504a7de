"""A capability plugs its config section, layers, hooks, CLI group and server tools in at once."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from mcp import Client
from pydantic import BaseModel, ConfigDict

from codemode import ExecutionResult, Session, SubprocessExecutor, assembly
from codemode.capability import Capability, NoConfig
from codemode.chain import NextRun, RunEvent
from codemode.cli import cli
from codemode.errors import ConfigError
from codemode.execution import InProcessExecutor
from codemode.result import ErrorInfo
from codemode.server.app import build_server
from codemode.server.sessions import SessionManager
from codemode.server.toolset import Call, ServerContext, Toolset
from codemode.tools import ToolCall
from codemode.tools.registry import NextCall, ToolRegistry
from codemode.workspace import Workspace

pytestmark = pytest.mark.anyio


class StampConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = "stamped"
    refuse: str | None = None


def stamp_layers(config: StampConfig) -> Iterator[tuple[str, Any]]:
    async def stamp(call: ToolCall, call_next: NextCall) -> Any:
        return f"{config.label}:{await call_next(call)}"

    yield "audit", stamp


def stamp_hooks(config: StampConfig) -> Iterator[tuple[str, Any]]:
    async def guard(event: RunEvent, call_next: NextRun) -> ExecutionResult:
        if config.refuse and config.refuse in event.code:
            return ExecutionResult(error=ErrorInfo("Refused", f"{config.refuse!r} is refused"))
        return await call_next(event)

    yield "checks", guard


@click.group("stamp")
def stamp_group() -> None:
    """The stamp capability."""


@stamp_group.command("show")
def stamp_show() -> None:
    click.echo("stamp here")


def stamp_tools(toolset: Toolset, ctx: ServerContext) -> None:
    @toolset.tool(description="Say the stamp.", read_only=True)
    async def stamp_label(call: Call) -> str:
        return "stamp"


STAMP = Capability(
    name="stamp",
    config=StampConfig,
    tool_layers=stamp_layers,
    run_hooks=stamp_hooks,
    commands={"stamp": "Show the stamp."},
    command=lambda name: stamp_group,
    server_tools=stamp_tools,
)


def double(n: int) -> int:
    """Twice n."""
    return 2 * n


def workspace(tmp_path: Path, config: dict[str, Any]) -> Workspace:
    (tmp_path / "config.json").write_text(json.dumps(config))
    return Workspace.open(tmp_path, env={}, capabilities=[*assembly.installed(), STAMP])


async def test_a_capability_is_assembled_from_its_config_section(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"stamp": {"label": "ok", "refuse": "import os"}})
    async with Session.for_workspace(ws, executor=SubprocessExecutor()) as s:
        s.register_tool(double, server="math")
        assert (await s.run("tools.math.double(n=2)")).value == "ok:4"
        refused = await s.run("import os")
        assert refused.error is not None and refused.error.message == "'import os' is refused"
    assert ("audit", "stamp") in [(stage, fn.__name__) for stage, fn in ws.registry().layers()]


async def test_a_capability_without_a_section_gets_its_defaults(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {})
    registry = ws.registry()
    registry.register(double, server="math")
    assert await registry.call("math", "double", {"n": 1}) == "stamped:2"


def test_a_bad_section_names_the_file_and_the_field(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"config\.json:1:\d+: stamp\.label: expected a string, got the number 5"
    ):
        workspace(tmp_path, {"stamp": {"label": 5}})


def test_capability_groups_join_the_codemode_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assembly, "installed", lambda: (*assembly.BUILTIN, STAMP))
    help_text = CliRunner().invoke(cli, ["--help"]).output
    for name in ("stamp", "skills", "artifacts", "state", "deps", "run", "serve"):
        assert f"  {name} " in help_text
    result = CliRunner().invoke(cli, ["stamp", "show"])
    assert (result.exit_code, result.output) == (0, "stamp here\n")


@pytest.fixture
async def context() -> AsyncIterator[ServerContext]:
    async def factory(key: str | None) -> Session:
        session = Session(InProcessExecutor())
        await session.start()
        return session

    ctx = ServerContext(SessionManager(factory), tools=ToolRegistry())
    yield ctx
    await ctx.sessions.aclose()


async def test_a_capability_adds_its_server_tools(context: ServerContext) -> None:
    async with Client(build_server(context, capabilities=[STAMP])) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("stamp_label", {})
    assert {"run_code", "stamp_label"} <= names and result.content[0].text == "stamp"  # type: ignore[union-attr]
    async with Client(build_server(context, capabilities=[STAMP], capability_tools=False)) as c:
        assert "stamp_label" not in {t.name for t in (await c.list_tools()).tools}


def test_capability_and_command_names_must_be_unique() -> None:
    twin = Capability(name="memory", config=NoConfig)
    with pytest.raises(ValueError, match="capability memory is declared twice"):
        assembly.check([*assembly.BUILTIN, twin])
    clash = Capability(name="other", config=NoConfig, commands={"skills": "x"}, command=print)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="command skills is declared twice"):
        assembly.check([*assembly.BUILTIN, clash])
