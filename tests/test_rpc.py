"""The worker -> host table: every surface agrees with it, and bad params become clear errors."""

from __future__ import annotations

import ast
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from mcp import Client

from codemode import FileStorage, InProcessExecutor, Session, SubprocessExecutor, ToolRegistry
from codemode.checkpoint.store import CHECKPOINT_METHODS, Checkpoints, Exchange
from codemode.hostapi import HostAPI
from codemode.live_rpc import OUTPUT_METHODS
from codemode.memory import Memory
from codemode.memory import cli as memory_cli
from codemode.memory.deps import Deps
from codemode.memory.server_tools import TOOLS
from codemode.rpc import methods
from codemode.server.app import build_server
from codemode.server.sessions import SessionManager
from codemode.server.toolset import ServerContext

REPO = Path(__file__).resolve().parents[1]
WORKER = REPO / "src" / "codemode_worker"
TABLE = methods()


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    return Memory(FileStorage(tmp_path / "store"), deps=Deps(tmp_path / "deps"))


# -- the worker ---------------------------------------------------------------------------
def _dict_keys(node: ast.expr, scope: ast.AST, module: ast.Module) -> tuple[set[str], bool]:
    """The literal keys of a params expression, and whether it may hold more (``**x``)."""
    if isinstance(node, ast.Dict):
        keys = {
            k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
        }
        return keys, any(k is None for k in node.keys)
    if isinstance(node, ast.Name):  # params = {...}; bridge.call("m", params)
        for stmt in ast.walk(scope):
            if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == node.id for t in stmt.targets
            ):
                return _dict_keys(stmt.value, scope, module)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        for fn in ast.walk(module):  # self._payload(...): the dict its ``return`` builds
            if isinstance(fn, ast.FunctionDef) and fn.name == node.func.attr:
                ret = next(s for s in ast.walk(fn) if isinstance(s, ast.Return))
                assert ret.value is not None
                return _dict_keys(ret.value, fn, module)
    raise AssertionError(f"cannot read the params of line {node.lineno}: use a dict literal")


def worker_calls() -> Iterator[tuple[str, str, set[str], bool]]:
    """(where, method, keys, open) for every ``bridge.call``/``bridge.acall`` of the worker."""
    for path in sorted(WORKER.glob("*.py")):
        module = ast.parse(path.read_text())
        for fn in ast.walk(module):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("call", "acall")
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "bridge"
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    keys, more = (
                        _dict_keys(node.args[1], fn, module)
                        if len(node.args) > 1
                        else (set(), False)
                    )
                    yield f"{path.name}:{node.lineno}", node.args[0].value, keys, more


def test_every_call_the_worker_makes_is_a_row_with_the_fields_it_accepts() -> None:
    calls = list(worker_calls())
    assert len(calls) > 30
    for where, name, keys, more in calls:
        assert name in TABLE, f"{where}: {name} is not in the table"
        fields = TABLE[name].params.model_fields
        assert keys <= set(fields), f"{where}: {name} does not accept {keys - set(fields)}"
        required = {f for f, info in fields.items() if info.is_required()}
        assert more or required <= keys, f"{where}: {name} misses {required - keys}"
    assert {name for _, name, _, _ in calls} == set(TABLE), "a row no worker namespace calls"


def test_the_host_serves_exactly_the_table(memory: Memory) -> None:
    host = HostAPI()
    ToolRegistry().install(host)
    memory.install(host)
    OUTPUT_METHODS.install(host, Session(InProcessExecutor()))
    CHECKPOINT_METHODS.install(host, Exchange(Checkpoints(memory.storage, "k")))
    assert host.methods() == sorted(TABLE)


# -- the MCP memory tools -----------------------------------------------------------------
@pytest.fixture
async def tool_schemas(memory: Memory) -> AsyncIterator[dict[str, dict[str, Any]]]:
    async def factory(key: str | None) -> Session:
        return Session(SubprocessExecutor())

    ctx = ServerContext(SessionManager(factory), memory=memory)
    async with Client(build_server(ctx)) as client:
        yield {t.name: t.input_schema for t in (await client.list_tools()).tools}


def _plain(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != "title"}


@pytest.mark.anyio
async def test_every_memory_tool_takes_its_arguments_from_its_row(
    tool_schemas: dict[str, dict[str, Any]],
) -> None:
    assert {t.name for t in TOOLS} <= set(tool_schemas)
    for tool in TOOLS:
        method = TABLE[tool.method]
        model = method.params.model_json_schema()["properties"]
        fields = tool.fields if tool.fields is not None else tuple(model)
        names = [tool.rename.get(f, f) for f in fields]
        props = tool_schemas[tool.name]["properties"]
        assert list(props) == [*names, *tool.extra], tool.name
        for field_name in fields:
            got = _plain(props[tool.rename.get(field_name, field_name)])
            if field_name in tool.types:  # a type spelled out for clients; the words stay
                assert got["description"] == model[field_name]["description"], tool.name
                continue
            assert got == _plain(model[field_name]), f"{tool.name}.{field_name}"


# -- the CLI ------------------------------------------------------------------------------
def test_every_memory_command_stands_on_a_row_and_takes_only_its_fields() -> None:
    groups = [memory_cli.skills, memory_cli.artifacts, memory_cli.state, memory_cli.deps]
    commands = {f"{g.name} {n}": c for g in groups for n, c in g.commands.items()}
    assert set(commands) == set(memory_cli.METHOD_OF)
    for key, command in commands.items():
        method = TABLE[memory_cli.METHOD_OF[key]]
        if command.callback is not None and command.callback.__name__ == "callback":
            own = {p.name for p in command.params if isinstance(p, click.Parameter)}
            assert own - {"base", "as_json"} <= set(method.params.model_fields), key


def test_the_architecture_doc_lists_every_row_with_its_fields() -> None:
    doc = (REPO / "docs" / "architecture.md").read_text()
    for name, method in TABLE.items():
        line = next((row for row in doc.splitlines() if row.startswith(f"| `{name}` |")), None)
        assert line is not None, name
        for field_name in method.params.model_fields:
            assert f"`{field_name}`" in line, f"{name}.{field_name}"


# -- malformed params ---------------------------------------------------------------------
@pytest.mark.anyio
async def test_malformed_params_from_the_code_come_back_as_clear_errors(tmp_path: Path) -> None:
    code = """
from codemode_worker import bridge
out = []
for method, params in [
    ("skills.rollback", {"name": "a", "version": "../../../mcp"}),
    ("skills.search", {"query": "q", "limit": "x"}),
    ("skills.get", {}),
    ("artifacts.load", {"name": "a", "path": "/etc/passwd"}),
    ("state.set", ["key", "value"]),
    ("tools.search", {"detail": "everything"}),
    ("skills.source", {"name": "a", "have_version": 1.5}),
]:
    try:
        bridge.call(method, params)
    except Exception as exc:
        out.append(f"{type(exc).__name__}: {exc}")
out
"""
    storage = FileStorage(base_path=tmp_path)
    async with Session(SubprocessExecutor(), storage=storage, tools=ToolRegistry()) as s:
        r = await s.run(code)
        assert (await s.run("1 + 1")).value == 2  # the session is fine afterwards
    assert r.is_ok, r.error
    assert r.value == [
        "ValidationError: skills.rollback: version: Input should be a valid integer "
        "(got '../../../mcp')",
        "ValidationError: skills.search: limit: Input should be a valid integer (got 'x')",
        "ValidationError: skills.get: missing argument 'name'",
        "ValidationError: artifacts.load: unexpected argument 'path'",
        "ValidationError: state.set: parameters must be an object",
        "ToolArgumentError: tools.search: detail: Input should be 'name', 'description' or "
        "'full' (got 'everything')",
        "ValidationError: skills.source: have_version: Input should be a valid integer (got 1.5)",
    ]
