"""A lone surrogate (``"\\udcff"``: a file name read with ``surrogateescape``, a broken
tool result) has no UTF-8 form. In a run's result (output, value, error) it is shown as
U+FFFD and the session lives on; in a call it is a clear error in the code. It stopped
the worker, losing the session's state."""

from __future__ import annotations

from typing import Any

import pytest

from codemode import Session, SubprocessExecutor

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("code", "field"),
    [
        ("print('name: a\\udcff.txt')", "stdout"),
        ("import sys; print('a\\udcff', file=sys.stderr)", "stderr"),
        ("'a\\udcff'", "value"),
        ("raise ValueError('bad \\udcff')", "error"),
        ("import os; os.fsdecode(b'caf\\xe9')", "value"),  # a non-UTF-8 file name
    ],
)
async def test_a_lone_surrogate_in_a_result_is_replaced_and_the_session_lives_on(
    code: str, field: str
) -> None:
    async with Session(SubprocessExecutor()) as s:
        await s.run("kept = 'state'")
        r = await s.run(code)
        assert not r.state_lost, r.to_text()
        shown = {"stdout": r.stdout, "stderr": r.stderr, "value": str(r.value)}.get(
            field, r.error.message if r.error else ""
        )
        assert "\ufffd" in shown and "\udcff" not in shown
        assert (await s.run("kept")).value == "state"


async def _mirror(params: dict[str, Any]) -> Any:
    return params.get("data")


async def test_a_call_with_a_lone_surrogate_is_a_clear_error_in_the_code() -> None:
    async with Session(SubprocessExecutor()) as s:
        s.host.register("test.mirror", _mirror)
        r = await s.run(
            "from codemode_worker import bridge\n"
            "try:\n"
            "    bridge.call('test.mirror', {'data': 'a\\udcff'})\n"
            "except ValueError as exc:\n"
            "    why = str(exc)\n"
            "why"
        )
        assert not r.state_lost and "lone surrogate" in str(r.value), r.to_text()


async def test_live_output_with_a_lone_surrogate_keeps_streaming() -> None:
    got: list[str] = []
    async with Session(SubprocessExecutor()) as s:
        code = "import time\nprint('a\\udcff', flush=True)\ntime.sleep(0.3)\nprint('after')"
        r = await s.run(code, on_output=lambda stream, text: got.append(text))
    assert r.stdout == "a\ufffd\nafter\n", r.to_text()
    assert "".join(got) == "a\ufffd\nafter\n"


async def test_code_holding_a_lone_surrogate_is_a_clear_error_and_the_session_lives_on() -> None:
    async with Session(SubprocessExecutor()) as s:
        await s.run("kept = 'state'")
        r = await s.run("x = '\udcff'\nlen(x)")  # the character itself, not its escape
        assert r.error is not None and "lone surrogate" in r.error.message, r.to_text()
        assert not r.state_lost
        assert (await s.run("kept")).value == "state"
