"""``from codemode import ...``: one deliberate surface, cheap to import, as README shows."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

import codemode
from codemode import ConfigError, FileStorage, Session, SubprocessExecutor
from codemode.memory import Memory

sys.path.insert(0, str(Path(__file__).parent / "storage"))
from redis_server import RedisServer

EXPECTED = [
    "RUN_STAGES",
    "TOOL_STAGES",
    "Agent",
    "BudgetExceeded",
    "CallContext",
    "Capability",
    "CodemodeError",
    "ConfigError",
    "CorruptRecord",
    "DepsError",
    "ErrorInfo",
    "ExecutionResult",
    "Executor",
    "ExecutorError",
    "FileStorage",
    "InProcessExecutor",
    "LLMAuthError",
    "LLMConfig",
    "LLMError",
    "Memory",
    "Middleware",
    "NextCall",
    "NextRun",
    "NotFound",
    "PythonSource",
    "RedisStorage",
    "RunEvent",
    "RunHook",
    "SandboxExecutor",
    "SandboxUnavailable",
    "ServerUnavailable",
    "Session",
    "SessionClosed",
    "Settings",
    "Storage",
    "StorageError",
    "StorageUnavailable",
    "SubprocessExecutor",
    "SyncSession",
    "TaskResult",
    "ToolArgumentError",
    "ToolCall",
    "ToolDenied",
    "ToolError",
    "ToolNotFound",
    "ToolRegistry",
    "ToolSource",
    "ToolSpec",
    "ToolTimeout",
    "ValidationError",
    "Workspace",
    "aexecute_task",
    "close_pools",
    "create_agent",
    "execute_task",
]


def python(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_public_names_are_exactly_the_curated_list() -> None:
    assert codemode.__all__ == EXPECTED
    for name in EXPECTED:
        assert getattr(codemode, name) is not None, name
    assert set(EXPECTED) <= set(dir(codemode))
    with pytest.raises(AttributeError, match="no attribute 'Sesion'"):
        codemode.Sesion  # noqa: B018


def test_every_public_class_lives_where_its_module_says() -> None:
    from codemode.execution.sandbox import SandboxExecutor
    from codemode.storage.redis import RedisStorage
    from codemode.tools.registry import ToolRegistry

    assert codemode.SandboxExecutor is SandboxExecutor
    assert codemode.RedisStorage is RedisStorage
    assert codemode.ToolRegistry is ToolRegistry


def test_import_codemode_loads_no_heavy_dependency() -> None:
    heavy = ["pydantic", "mcp", "jsonschema", "yaml", "redis", "bm25s", "click", "anyio"]
    loaded = python(
        f"""
        import sys
        import codemode
        print(sorted(m for m in {heavy!r} if m in sys.modules))
        print(sorted(m for m in sys.modules if m.startswith("codemode")))
        """
    ).splitlines()
    assert loaded[0] == "[]"
    assert loaded[1] == "['codemode', 'codemode.errors']"


def test_a_session_does_not_load_the_mcp_sdk_or_redis() -> None:
    loaded = python(
        """
        import sys
        from codemode import Session, SubprocessExecutor
        print(sorted(m for m in ("mcp", "redis", "pydantic") if m in sys.modules))
        """
    )
    assert loaded.strip() == "[]"


def test_redis_storage_imports_without_the_extra_and_names_it_when_built() -> None:
    out = python(
        """
        import sys
        sys.modules["redis"] = None  # as if the redis extra were not installed
        from codemode import ConfigError, RedisStorage
        try:
            RedisStorage(url="redis://127.0.0.1:6379/0", prefix="x")
        except ConfigError as exc:
            print(exc)
        """
    )
    assert out.strip() == "RedisStorage needs the Redis client: pip install 'codemode[redis]'"


def test_file_storage_takes_base_path_or_its_positional_directory(tmp_path: Path) -> None:
    assert FileStorage(base_path=tmp_path).base == FileStorage(tmp_path).base == tmp_path
    with pytest.raises(ConfigError, match="FileStorage needs its directory"):
        FileStorage()
    with pytest.raises(ConfigError, match="FileStorage needs its directory"):
        FileStorage(tmp_path, base_path=tmp_path)


def test_storage_and_memory_together_are_refused(tmp_path: Path) -> None:
    storage = FileStorage(base_path=tmp_path)
    with pytest.raises(ConfigError, match="either storage= or memory=, not both"):
        Session(SubprocessExecutor(), storage=storage, memory=Memory(storage))


SAVE = "skills.create('twice', 'def run(n):\\n    return 2 * n', 'Double n.')\nstate.set('k', 7)"
READ = "(skills.twice(n=21), state.get('k'), [a['name'] for a in artifacts.list()])"


@pytest.mark.anyio
async def test_a_session_on_file_storage_keeps_memory_across_sessions(tmp_path: Path) -> None:
    async with Session(storage=FileStorage(base_path=tmp_path), executor=SubprocessExecutor()) as s:
        assert (await s.run(SAVE + "\nartifacts.save('a', b'x')")).is_ok
    async with Session(storage=FileStorage(base_path=tmp_path), executor=SubprocessExecutor()) as s:
        assert (await s.run(READ)).value == [42, 7, ["a"]]


@pytest.mark.anyio
@pytest.mark.redis
async def test_a_session_on_redis_storage_keeps_memory_across_sessions() -> None:
    from codemode import RedisStorage

    prefix = f"t-{uuid.uuid4().hex[:8]}"
    with RedisServer() as server:
        for code in (SAVE, READ):
            storage = RedisStorage(url=server.url, prefix=prefix)
            async with Session(storage=storage, executor=SubprocessExecutor()) as s:
                r = await s.run(code)
                assert r.is_ok, r.error
        assert r.value == [42, 7, []]


@pytest.mark.anyio
async def test_reset_forgets_the_codes_variables_but_not_its_memory(tmp_path: Path) -> None:
    async with Session(storage=FileStorage(base_path=tmp_path), executor=SubprocessExecutor()) as s:
        await s.run("x = 1\nstate.set('kept', True)")
        await s.reset()
        r = await s.run("('x' in globals(), state.get('kept'))")
    assert r.value == [False, True]
