"""Skills, artifacts, state and deps used from the agent's code in real sessions."""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from codemode import Session, SubprocessExecutor
from codemode.memory import Memory
from codemode.storage.redis import RedisStorage

sys.path.insert(0, str(Path(__file__).parents[1] / "storage"))
from redis_server import RedisServer

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
EDGE_SERVER = REPO / "tests" / "fixtures" / "servers" / "edge_server.py"


def new_session(memory: Memory) -> Session:
    return Session(SubprocessExecutor(deps_dir=memory.deps_dir), memory=memory)


@pytest.fixture
async def ws_session(tmp_path: Path) -> AsyncIterator[Session]:
    async with new_session(Memory.from_workspace(tmp_path)) as s:
        yield s


async def ok(session: Session, code: str) -> Any:
    r = await session.run(code)
    assert r.is_ok, r.to_text()
    return r.value


SLUG = '''
def run(text: str, sep: str = "-"):
    """Turn text into a URL slug."""
    import re
    return sep.join(re.findall(r"[a-z0-9]+", text.lower()))
'''


async def test_a_skill_created_in_one_session_is_found_and_invoked_after_a_restart(
    tmp_path: Path,
) -> None:
    async with new_session(Memory.from_workspace(tmp_path)) as s1:
        created = await ok(
            s1, f"skills.create('slugify', {SLUG!r}, 'Make a URL slug from a title')"
        )
        assert created["version"] == 1
    async with new_session(Memory.from_workspace(tmp_path)) as s2:
        assert await ok(s2, "skills.search('url slug title')[0]['name']") == "slugify"
        assert await ok(s2, "skills.invoke('slugify', text='Hello, World!')") == "hello-world"
        assert await ok(s2, "skills.slugify(text='A B', sep='_')") == "a_b"


async def test_a_function_defined_in_the_session_can_be_saved_as_a_skill(
    ws_session: Session,
) -> None:
    code = (
        "def fact(n: int):\n"
        '    """Factorial of n."""\n'
        "    return 1 if n <= 1 else n * fact(n - 1)\n"
        "skills.create('factorial', fact)['signature']"
    )
    assert await ok(ws_session, code) == "run(n: int)"
    await ws_session.reset()
    assert await ok(ws_session, "skills.factorial(n=5)") == 120
    assert await ok(ws_session, "skills.get('factorial')['description']") == "Factorial of n."


async def test_skill_code_runs_in_the_worker_not_on_the_host(ws_session: Session) -> None:
    await ok(
        ws_session, "skills.create('pid', 'import os\\ndef run():\\n    return os.getpid()', 'pid')"
    )
    worker_pid = await ok(ws_session, "import os; os.getpid()")
    assert await ok(ws_session, "skills.pid()") == worker_pid != os.getpid()


async def test_a_skill_calls_a_python_tool_and_another_skill(ws_session: Session) -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    ws_session.register_tool(add, server="math")
    await ok(ws_session, "skills.create('double', 'def run(x):\\n    return x * 2', 'double x')")
    code = "def run(a, b):\n    return skills.double(x=tools.math.add(a=a, b=b))"
    await ok(ws_session, f"skills.create('add_then_double', {code!r}, 'add then double')")
    assert await ok(ws_session, "skills.add_then_double(a=2, b=3)") == 10


async def test_a_skill_calls_a_real_mcp_server_tool(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(
        json.dumps(
            {"mcpServers": {"edge": {"command": sys.executable, "args": [str(EDGE_SERVER)]}}}
        )
    )
    async with Session.from_base(tmp_path) as s:
        code = "def run(a, b):\n    return tools.edge.add(a=a, b=b)"
        await ok(s, f"skills.create('mcp_add', {code!r}, 'add via the edge MCP server')")
        assert await ok(s, "skills.mcp_add(a=20, b=22)") == {"sum": 42}


async def test_async_skills_work_from_sync_and_from_async_code(ws_session: Session) -> None:
    code = "import asyncio\nasync def run(x):\n    await asyncio.sleep(0)\n    return x + 1"
    await ok(ws_session, f"skills.create('inc', {code!r}, 'increment later')")
    assert await ok(ws_session, "skills.inc(x=1)") == 2
    assert await ok(ws_session, "await skills.ainvoke('inc', x=2)") == 3
    assert await ok(ws_session, "await skills.inc.aio(x=3)") == 4
    # a sync call from inside a running loop (a helper thread finishes it)
    assert (
        await ok(
            ws_session, "import asyncio\nasync def f():\n    return skills.inc(x=9)\nawait f()"
        )
        == 10
    )


async def test_an_updated_skill_is_reloaded_and_a_rollback_restores_it(ws_session: Session) -> None:
    await ok(ws_session, "skills.create('v', 'def run():\\n    return 1', 'version')")
    assert await ok(ws_session, "skills.v()") == 1
    await ok(ws_session, "skills.update('v', source='def run():\\n    return 2')")
    assert await ok(ws_session, "skills.v()") == 2
    await ok(ws_session, "skills.rollback('v')")
    assert await ok(ws_session, "skills.v()") == 1


async def test_bad_arguments_and_missing_skills_give_clear_errors(ws_session: Session) -> None:
    await ok(ws_session, "skills.create('one', 'def run(x):\\n    return x', 'identity')")
    r = await ws_session.run("skills.one(y=1)")
    assert r.error is not None and "skills.one(x)" in r.error.message
    r = await ws_session.run("skills.onee()")
    assert r.error is not None and r.error.type.endswith("NotFound")
    assert "did you mean one" in r.error.message
    r = await ws_session.run("skills.create('bad', 'def run(:', 'x')")
    assert r.error is not None and "syntax error" in r.error.message


async def test_a_skill_error_shows_the_skill_source_line(ws_session: Session) -> None:
    await ok(
        ws_session, "skills.create('boom', 'def run():\\n    raise ValueError(\"kaboom\")', 'x')"
    )
    r = await ws_session.run("skills.boom()")
    assert r.error is not None and r.error.type == "ValueError"
    assert (
        "<skill boom v1>" in r.error.traceback and 'raise ValueError("kaboom")' in r.error.traceback
    )


async def test_artifacts_and_state_round_trip_from_code(ws_session: Session) -> None:
    await ok(ws_session, "artifacts.save('raw', bytes(range(256)), description='all bytes')")
    assert await ok(ws_session, "artifacts.load('raw') == bytes(range(256))") is True
    await ok(ws_session, "artifacts.save('doc', {'a': [1, 2]})")
    assert await ok(ws_session, "artifacts.load('doc')") == {"a": [1, 2]}
    rows = await ok(ws_session, "[(a['name'], a['type'], a['size']) for a in artifacts.list()]")
    assert rows == [["doc", "json", 11], ["raw", "bytes", 256]]
    r = await ws_session.run("artifacts.save('t', (1, 2))")
    assert r.error is not None and "tuple" in r.error.message
    await ok(ws_session, "state['step'] = 3\nstate.update(done=True)")
    assert await ok(ws_session, "state.get()") == {"step": 3, "done": True}
    assert await ok(ws_session, "state['step'] + len(state)") == 5
    assert ws_session.memory is not None
    assert await ws_session.memory.state.get("step") == 3  # the host (and MCP server) see it


async def test_deps_add_import_remove_a_package_from_pypi(tmp_path: Path) -> None:
    memory = Memory.from_workspace(tmp_path)
    async with new_session(memory) as s:
        r = await s.run("import six")
        assert r.error is not None and "ModuleNotFoundError" in r.error.type
        added = await ok(s, "deps.add('six')")
        assert added["name"] == "six"
        assert await ok(s, f"import six\nsix.__file__.startswith({str(tmp_path)!r})") is True
        assert [d["name"] for d in await ok(s, "deps.list()")] == ["six"]
        assert await ok(s, "deps.remove('six')") is True
        await s.reset()
        r = await s.run("import sys\nsys.modules.pop('six', None)\nimport six")
        assert r.error is not None and "ModuleNotFoundError" in r.error.type
    assert (tmp_path / "deps" / ".requirements.json").read_text().count("six") == 0


async def test_runtime_deps_can_be_turned_off(tmp_path: Path) -> None:
    memory = Memory.from_workspace(tmp_path, allow_runtime_deps=False)
    async with new_session(memory) as s:
        r = await s.run("deps.add('six')")
        assert r.error is not None and r.error.type.endswith("DepsError")
        assert "turned off" in r.error.message


@pytest.mark.redis
async def test_two_sessions_share_skills_and_artifacts_through_redis() -> None:
    with RedisServer() as server:
        prefix = f"team-{uuid.uuid4().hex[:6]}"
        m1 = Memory(RedisStorage(server.url, prefix))
        m2 = Memory(RedisStorage(server.url, prefix))
        try:
            async with new_session(m1) as a, new_session(m2) as b:
                await ok(a, f"skills.create('slugify', {SLUG!r}, 'Make a URL slug')")
                await ok(a, "artifacts.save('shared', b'from a')")
                assert await ok(b, "skills.search('slug')[0]['name']") == "slugify"
                assert await ok(b, "skills.slugify(text='Red Is')") == "red-is"
                assert await ok(b, "artifacts.load('shared') == b'from a'") is True
                await ok(b, "state['by'] = 'b'")
                assert await ok(a, "state['by']") == "b"
        finally:
            await m1.aclose()
            await m2.aclose()


# -- the MCP server's memory tools (in-process MCP client) ---------------------------------


@asynccontextmanager
async def memory_server(memory: Memory) -> AsyncIterator[Client]:
    from codemode.server.app import build_server
    from codemode.server.sessions import SessionManager
    from codemode.server.toolset import ServerContext

    async def factory(key: str | None) -> Session:
        session = new_session(memory)
        await session.start()
        return session

    ctx = ServerContext(SessionManager(factory), memory=memory)
    try:
        async with Client(build_server(ctx)) as client:
            yield client
    finally:
        await ctx.sessions.aclose()


def text(result: Any) -> str:
    return str(result.content[0].text)


async def test_the_server_creates_finds_invokes_and_deletes_skills(tmp_path: Path) -> None:
    async with memory_server(Memory.from_workspace(tmp_path)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {
            "list_skills",
            "search_skills",
            "get_skill",
            "create_skill",
            "delete_skill",
            "invoke_skill",
            "add_dep",
            "remove_dep",
            "list_deps",
        } <= names
        r = await client.call_tool(
            "create_skill",
            {
                "name": "slugify",
                "code": SLUG,
                "description": "Make a URL slug",
                "parameters": {"text": "the title"},
            },
        )
        assert not r.is_error and "slugify v1" in text(r)
        r = await client.call_tool("search_skills", {"query": "slug for a url"})
        assert text(r).startswith("skills.slugify(text: str, sep: str='-')")
        r = await client.call_tool(
            "invoke_skill", {"name": "slugify", "arguments": {"text": "A b"}}
        )
        assert not r.is_error and r.structured_content["value"] == "a-b"
        r = await client.call_tool("get_skill", {"name": "slugify"})
        assert "description: Make a URL slug" in text(r) and "def run" in text(r)
        r = await client.call_tool(
            "create_skill", {"name": "x", "code": "def nope(): pass", "description": "d"}
        )
        assert r.is_error and "ValidationError" in text(r)
        r = await client.call_tool("delete_skill", {"name": "slugify"})
        assert r.structured_content == {"deleted": True}
        r = await client.call_tool("list_skills", {})
        assert "No skills" in text(r)


async def test_invoke_skill_runs_in_the_callers_session_worker(tmp_path: Path) -> None:
    memory = Memory.from_workspace(tmp_path)
    await memory.skills.create("pid", "import os\ndef run():\n    return os.getpid()", "pid")
    async with memory_server(memory) as client:
        r = await client.call_tool("invoke_skill", {"name": "pid"})
        pid = int(r.structured_content["value"])
        r2 = await client.call_tool("run_code", {"code": "import os; os.getpid()"})
        assert pid == r2.structured_content["value"] != os.getpid()


async def test_the_server_saves_loads_and_lists_artifacts_and_state(tmp_path: Path) -> None:
    memory = Memory.from_workspace(tmp_path)
    async with memory_server(memory) as client:
        await client.call_tool(
            "save_artifact", {"name": "doc", "data": {"k": [1]}, "description": "a doc"}
        )
        await client.call_tool("save_artifact", {"name": "bin", "data": "AAEC", "is_base64": True})
        assert await memory.artifacts.load("bin") == b"\x00\x01\x02"
        r = await client.call_tool("load_artifact", {"name": "doc"})
        assert r.structured_content["value"] == {"k": [1]}
        r = await client.call_tool("list_artifacts", {})
        assert "doc (json, 9 bytes" in text(r) and "a doc" in text(r)
        await client.call_tool("save_state", {"state_data": {"step": 1}})
        await client.call_tool("save_state", {"state_data": {"more": True}, "merge": True})
        r = await client.call_tool("run_code", {"code": "state.get()"})
        assert r.structured_content["value"] == {"step": 1, "more": True}
        r = await client.call_tool("get_state", {"key": "step"})
        assert r.structured_content == {
            "key": "step",
            "value": 1,
            "exists": True,  # the seeds' shape, beside codemode's
            "data": {"step": 1, "more": True},
        }
        r = await client.call_tool("delete_artifact", {"name": "doc"})
        assert r.structured_content == {"deleted": True}


async def test_dependency_changing_tools_are_absent_when_runtime_deps_are_off(
    tmp_path: Path,
) -> None:
    async with memory_server(Memory.from_workspace(tmp_path, allow_runtime_deps=False)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert "list_deps" in names and not {"add_dep", "remove_dep"} & names


@pytest.mark.redis
async def test_losing_redis_gives_the_code_a_clear_storage_error() -> None:
    server = RedisServer().start()
    memory = Memory(RedisStorage(server.url, "lost", connect_timeout=0.5))
    try:
        async with new_session(memory) as s:
            await ok(s, "artifacts.save('x', 1)")
            server.stop()
            r = await s.run("artifacts.save('x', 2)")
            assert r.error is not None and r.error.type.endswith("StorageUnavailable")
            assert "unreachable" in r.error.message and "nothing was written" in r.error.message
    finally:
        server.stop()
        await memory.aclose()


@pytest.mark.parametrize("sandboxed", [False, True])
async def test_a_module_of_the_deps_directory_never_replaces_a_standard_one(
    tmp_path: Path, sandboxed: bool
) -> None:
    """Every session of a workspace imports from its deps directory, which any of them may
    fill (``deps.add``): a package named like a standard module (``asyncio``, which the
    worker imports when code awaits; ``csv``) must not run in place of it in the others.
    Packages of their own names still import."""
    from codemode.execution.sandbox import SandboxExecutor

    deps = tmp_path / "deps"
    (deps / "asyncio").mkdir(parents=True)
    (deps / "asyncio" / "__init__.py").write_text("raise SystemExit('the deps asyncio ran')\n")
    (deps / "csv.py").write_text("FROM_DEPS = True\n")
    (deps / "own_pkg_of_deps.py").write_text("X = 42\n")
    executor: Any = (
        SandboxExecutor(deps_dir=deps, pool_size=0)
        if sandboxed
        else SubprocessExecutor(deps_dir=deps)
    )
    async with Session(executor) as s:
        imported = await ok(
            s, "import csv, own_pkg_of_deps\n[hasattr(csv, 'FROM_DEPS'), own_pkg_of_deps.X]"
        )
        awaited = await ok(s, "import asyncio\nawait asyncio.sleep(0)\n'awaited'")
    assert imported == [False, 42]
    assert awaited == "awaited"
