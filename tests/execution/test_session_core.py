"""A session keeps state, behaves like a REPL, and reports the code's errors as data."""

from __future__ import annotations

import asyncio

import pytest

from codemode import InProcessExecutor, Session, SessionClosed, SubprocessExecutor, SyncSession

pytestmark = pytest.mark.anyio


async def test_variables_imports_functions_and_classes_persist(session: Session) -> None:
    await session.run("import math\nx = 41\ndef f(v): return v + 1\nclass C: k = 2")
    r = await session.run("f(x) + C.k + int(math.sqrt(0))")
    assert r.is_ok and r.value == 44


async def test_top_level_await_works_and_returns_the_value(session: Session) -> None:
    r = await session.run(
        "import asyncio\nawait asyncio.sleep(0)\nawait asyncio.sleep(0, result=7)"
    )
    assert r.value == 7


async def test_final_expression_is_the_value_like_a_repl(session: Session) -> None:
    assert (await session.run("1 + 1")).value == 2
    r = await session.run("y = 3")
    assert r.value is None and not r.has_value
    r = await session.run("None")
    assert not r.has_value
    r = await session.run("2 + 2;")
    assert not r.has_value


async def test_json_safe_values_come_back_as_python_values(session: Session) -> None:
    r = await session.run("{'a': [1, 2.5, None, True], 'b': {'c': 'd'}}")
    assert r.value == {"a": [1, 2.5, None, True], "b": {"c": "d"}} and not r.value_is_repr


async def test_other_values_come_back_as_their_repr_with_a_flag(session: Session) -> None:
    r = await session.run("import datetime\ndatetime.date(2026, 1, 2)")
    assert r.value_is_repr and r.value == "datetime.date(2026, 1, 2)"
    r = await session.run("{1: 'int key'}")
    assert r.value_is_repr and r.value == "{1: 'int key'}"


async def test_underscore_holds_the_last_value(session: Session) -> None:
    await session.run("40 + 2")
    assert (await session.run("_")).value == 42


async def test_syntax_error_reports_line_and_column(session: Session) -> None:
    r = await session.run("x = 1\ny = (2 +\n")
    assert r.error is not None and r.error.type == "SyntaxError"
    assert r.error.lineno == 2 and r.error.offset is not None


async def test_runtime_error_has_a_traceback_trimmed_to_the_users_code(session: Session) -> None:
    r = await session.run("def f():\n    return 1 / 0\n\nf()")
    assert r.error is not None and r.error.type == "ZeroDivisionError"
    assert r.error.lineno == 2
    assert "codemode_worker" not in r.error.traceback
    assert 'File "<cell' in r.error.traceback and "return 1 / 0" in r.error.traceback
    assert (await session.run("1")).value == 1


async def test_stdout_and_stderr_are_captured_separately(session: Session) -> None:
    r = await session.run("import sys\nprint('out')\nprint('err', file=sys.stderr)")
    assert r.stdout == "out\n" and r.stderr == "err\n"


async def test_fd_level_output_of_child_processes_is_captured(session: Session) -> None:
    r = await session.run("import os\nos.write(1, b'from fd\\n')\nos.system('echo from child')")
    assert "from fd" in r.stdout and "from child" in r.stdout


async def test_non_utf8_bytes_written_to_stdout_are_replaced_not_fatal(session: Session) -> None:
    r = await session.run(
        "import sys, os\nsys.stdout.buffer.write(b'\\xff\\xfe ok\\n')\nos.write(1, b'\\x80 raw\\n')"
    )
    assert r.is_ok
    assert "\ufffd\ufffd ok" in r.stdout and "\ufffd raw" in r.stdout


async def test_output_flood_is_capped_with_a_visible_marker() -> None:
    async with Session(SubprocessExecutor(max_output=100_000)) as s:
        r = await s.run("line = 'x' * 999\nfor _ in range(100_000):\n    print(line)", timeout=60)
        assert r.is_ok and r.stdout_truncated
        assert len(r.stdout) < 200_000
        assert "truncated" in r.stdout
        assert (await s.run("print('after')")).stdout == "after\n"


async def test_exceptions_of_the_code_do_not_break_the_session(session: Session) -> None:
    await session.run("raise SystemExit(3)")
    await session.run("raise KeyboardInterrupt")
    assert (await session.run("'alive'")).value == "alive"


async def test_reset_clears_user_state_but_keeps_the_worker(session: Session) -> None:
    await session.run("import os\nz = 5\npid = os.getpid()")
    before = (await session.run("pid")).value
    await session.reset()
    r = await session.run("z")
    assert r.error is not None and r.error.type == "NameError"
    assert (await session.run("import os; os.getpid()")).value == before


async def test_ten_concurrent_sessions_do_not_see_each_others_variables() -> None:
    async def one(i: int) -> object:
        async with Session(SubprocessExecutor()) as s:
            await s.run(f"secret = {i}")
            await asyncio.sleep(0.05)
            r = await s.run("secret")
            return r.value

    values = await asyncio.gather(*(one(i) for i in range(10)))
    assert values == list(range(10))


async def test_a_prestarted_worker_starts_its_session_fresh_after_its_warm_up() -> None:
    """Workers run throwaway cells before they say ready; a session sees none of them."""
    ex = SubprocessExecutor(pool_size=1, memory_limit_mb=778)
    await ex.warm()
    async with Session(ex) as s, Session(SubprocessExecutor(pool_size=0)) as cold:
        names = "sorted(k for k in globals() if not k.startswith('__'))"  # `_` included
        fresh = (await s.run(names)).value
        assert fresh == (await cold.run(names)).value and not {"n", "m", "_"} & set(fresh)
        r = await s.run("1 / 0")
        assert r.error is not None and 'File "<cell 2>"' in r.error.traceback
        cells = "import linecache; sorted(k for k in linecache.cache if k.startswith('<cell'))"
        lines = await s.run(cells)
        assert lines.value == ["<cell 1>", "<cell 2>", "<cell 3>"]


async def test_a_closed_session_refuses_to_run() -> None:
    s = Session(SubprocessExecutor())
    await s.start()
    await s.close()
    with pytest.raises(SessionClosed):
        await s.run("1")


async def test_warm_pool_hands_out_prestarted_workers() -> None:
    from codemode.execution.pool import get_pool

    ex = SubprocessExecutor(pool_size=2, memory_limit_mb=777)
    await ex.warm()
    pool = get_pool(ex.pool_key(), ex.spawn, ex.pool_size)
    assert len(pool) == 2
    prestarted = {spawned.proc.pid for spawned in pool._ready}
    async with Session(ex) as s:
        assert (await s.run("import os; os.getpid()")).value in prestarted
        assert (await s.run("1+1")).value == 2


def test_sync_facade_runs_code() -> None:
    with SyncSession(SubprocessExecutor()) as s:
        s.run("a = 20")
        assert s.run("a * 2").value == 40


async def test_inprocess_executor_keeps_state_and_captures_output() -> None:
    async with Session(InProcessExecutor()) as s:
        await s.run("k = 2")
        r = await s.run("print('hello')\nk * 21")
        assert r.stdout == "hello\n" and r.value == 42


async def test_inprocess_executor_interrupts_a_busy_loop_on_timeout() -> None:
    async with Session(InProcessExecutor(interrupt_grace=2)) as s:
        await s.run("kept = 1")
        r = await s.run("while True: pass", timeout=0.5)
        assert r.timed_out and not r.state_lost
        assert (await s.run("kept")).value == 1
