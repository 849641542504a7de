"""Tools inside a real session: the agent's code calls host tools over the worker protocol."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from codemode import Session, SubprocessExecutor
from codemode.execution import InProcessExecutor
from codemode.tools import ToolRegistry

pytestmark = pytest.mark.anyio


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def slow(x: int) -> int:
    """Sleep 0.2 s, then echo."""
    await asyncio.sleep(0.2)
    return x


def fail(reason: str) -> None:
    """Always fails."""
    raise RuntimeError(reason)


@pytest.fixture(params=["subprocess", "inprocess"])
async def session(request: pytest.FixtureRequest) -> AsyncIterator[Session]:
    reg = ToolRegistry()
    for fn in (add, slow, fail):
        reg.register(fn)
    reg.register(add, server="my-math", name="add-ints")
    executor = SubprocessExecutor() if request.param == "subprocess" else InProcessExecutor()
    async with Session(executor, tools=reg) as s:
        yield s


async def test_a_tool_is_called_as_an_attribute(session: Session) -> None:
    r = await session.run("tools.local.add(a=1, b=2)")
    assert r.is_ok and r.value == 3
    assert (await session.run("tools.local.add(4, b=5)")).value == 9


async def test_a_tool_is_imported_from_the_servers_package(session: Session) -> None:
    r = await session.run(
        "from servers.local import add\n"
        "import inspect\n"
        "(add(3, 4), str(inspect.signature(add)), add.__doc__)"
    )
    assert r.is_ok, r.to_text()
    assert r.value == [7, "(a: int, b: int) -> int", "Add two integers."]


async def test_mapped_names_work_in_both_styles(session: Session) -> None:
    r = await session.run(
        "from servers.my_math import add_ints\n"
        "(add_ints(1, 1), tools.my_math.add_ints(a=2, b=2), tools['my-math']['add-ints'](a=3, b=3))"
    )
    assert r.value == [2, 4, 6], r.to_text()


async def test_a_failing_tool_raises_tool_error_in_the_agents_code(session: Session) -> None:
    r = await session.run(
        "try:\n"
        "    tools.local.fail(reason='disk on fire')\n"
        "except ToolError as e:\n"
        "    caught = (type(e).__name__, e.server, e.tool, e.message)\n"
        "caught"
    )
    assert r.value == ["ToolError", "local", "fail", "RuntimeError: disk on fire"]


async def test_an_uncaught_tool_error_is_the_runs_error(session: Session) -> None:
    r = await session.run("tools.local.fail(reason='boom')")
    assert r.error is not None and r.error.type.endswith("ToolError")
    assert "local.fail: RuntimeError: boom" in r.error.message


async def test_argument_errors_name_the_fields_and_show_the_signature(session: Session) -> None:
    r = await session.run("tools.local.add(a='x', c=1)")
    assert r.error is not None and r.error.type.endswith("ToolArgumentError")
    for part in (
        "missing required argument 'b'",
        "unknown argument 'c'",
        "argument 'a': expected integer",
        "signature: local.add(a: int, b: int) -> int",
    ):
        assert part in r.error.message
    r = await session.run(
        "try:\n    tools.local.add(1)\nexcept TypeError as e:\n    out = type(e).__name__\nout"
    )
    assert r.value == "ToolArgumentError"  # also a TypeError, as for a Python function


async def test_an_unknown_tool_suggests_close_names(session: Session) -> None:
    r = await session.run("tools.local.ad(a=1)")
    assert r.error is not None and r.error.type.endswith("ToolNotFound")
    assert "did you mean local.add" in r.error.message
    r = await session.run("hasattr(tools.local, 'nope'), hasattr(tools.local, 'add')")
    assert r.value == [False, True]


async def test_concurrent_calls_overlap(session: Session) -> None:
    r = await session.run(
        "import asyncio, time\n"
        "t0 = time.perf_counter()\n"
        "calls = [tools.local.slow_async(x=i) for i in range(4)] + [tools.local.slow.aio(x=4)]\n"
        "out = await asyncio.gather(*calls)\n"
        "(out, time.perf_counter() - t0)"
    )
    assert r.is_ok, r.to_text()
    values, elapsed = r.value
    assert values == [0, 1, 2, 3, 4]
    assert elapsed < 1.0  # sequential would take 1 s


async def test_discovery_works_from_the_agents_code(session: Session) -> None:
    r = await session.run(
        "(tools.search('add integers', limit=1), [s['name'] for s in tools.servers()],"
        " tools.describe('local.add')['signature'], sorted(dir(tools.local))[:2])"
    )
    assert r.is_ok, r.to_text()
    hits, servers, sig, names = r.value
    assert hits[0]["name"] in ("local.add", "my_math.add_ints")
    assert servers == ["local", "my_math"]
    assert sig == "local.add(a: int, b: int) -> int"
    assert names == ["add", "add_async"]


async def test_tools_and_imports_work_again_after_a_reset(session: Session) -> None:
    assert (await session.run("from servers.local import add\nadd(1, 1)")).value == 2
    await session.reset()
    r = await session.run("from servers.local import add\n(add(2, 2), repr(tools.local.add))")
    assert r.value == [4, "<tool local.add(a: int, b: int) -> int>"], r.to_text()


async def test_tools_registered_after_start_are_found(session: Session) -> None:
    assert (await session.run("tools.local")).is_ok
    session.register_tool(lambda: "hi", name="greet")
    r = await session.run("tools.local.greet(), __import__('servers.local').local.greet()")
    assert r.value == ["hi", "hi"], r.to_text()
