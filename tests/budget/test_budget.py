"""Budgets per run and per session: exceeding one raises a clear error naming the budget
and where to raise it; refused calls never reach the upstream server."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from codemode.approval import ApprovalRequest

pytestmark = pytest.mark.anyio

CALLS = """
done, error = 0, None
for i in range({n}):
    try:
        tools.notes.{tool}({args})
        done += 1
    except BudgetExceeded as e:
        error = (e.budget, e.limit, e.used, str(e), isinstance(e, ToolDenied))
        break
(done, error)
"""


def calls(n: int, tool: str = "read_note", args: str = "name='hello'") -> str:
    return CALLS.format(n=n, tool=tool, args=args)


async def test_a_run_over_its_tool_call_budget_gets_an_error_naming_it_and_how_to_raise_it(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"budget": {"run": {"tool_calls": 2}}})
    async with open_notes(notes_ws) as s:
        first = await s.run(calls(5))
        second = await s.run(calls(5))
    done, (budget, limit, used, message, is_denial) = first.value
    assert (done, budget, limit, used, is_denial) == (2, "budget.run.tool_calls", 2, 2, True)
    assert "this run's budget of 2 tool calls is spent" in message
    assert 'raise it in the workspace\'s config under "budget" -> "run" -> "tool_calls"' in message
    assert second.value[0] == 2  # each run has its own budget
    assert notes_ws.calls() == ["read_note"] * 4


async def test_per_tool_budgets_take_the_first_matching_pattern_before_the_default(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure(
        {"budget": {"run": {"tool_calls_per_tool": 1, "tools": {"notes.read_*": 3}}}}
    )
    async with open_notes(notes_ws) as s:
        reads = await s.run(calls(9))
        lists = await s.run(calls(9, "list_notes", ""))
    assert reads.value[0] == 3 and reads.value[1][0] == 'budget.run.tools["notes.read_*"]'
    assert "calls to notes.read_note" in reads.value[1][3]
    assert lists.value[0] == 1 and lists.value[1][0] == "budget.run.tool_calls_per_tool"


async def test_a_session_budget_spans_its_runs_and_each_session_has_its_own(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"budget": {"session": {"tool_calls": 3}}})
    async with open_notes(notes_ws) as s:
        first = await s.run(calls(2))
        second = await s.run(calls(2))
    async with open_notes(notes_ws) as other:
        fresh = await other.run(calls(2))
    assert first.value == [2, None]
    assert second.value[0] == 1 and "this session's budget of 3 tool calls" in second.value[1][3]
    assert fresh.value == [2, None]


async def test_bytes_received_are_counted_and_the_calls_after_the_limit_are_refused(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"budget": {"run": {"tool_bytes": 5000}}})
    async with open_notes(notes_ws) as s:
        result = await s.run(calls(5, "big", "size=4000"))
    done, error = result.value
    assert done == 2  # the call that crossed the limit ran and returned its result
    assert error[0] == "budget.run.tool_bytes" and error[2] == 8000
    assert "bytes received from tools" in error[3]
    assert notes_ws.calls() == ["big", "big"]


async def test_calls_the_policy_refuses_cost_nothing(notes_ws: Any, open_notes: Any) -> None:
    notes_ws.configure({"policy": {"destructive": "deny"}, "budget": {"run": {"tool_calls": 1}}})
    code = """
for _ in range(3):
    try:
        tools.notes.delete_note(name='x')
    except ToolDenied:
        pass
tools.notes.read_note(name='hello')
"""
    async with open_notes(notes_ws) as s:
        result = await s.run(code)
    assert result.value == "hello world"


async def test_a_run_that_outlives_its_wall_time_budget_is_stopped_saying_so(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"budget": {"run": {"wall_time": 1}}})
    async with open_notes(notes_ws) as s:
        result = await s.run("while True:\n    pass", timeout=60)
    assert result.timed_out
    assert result.error is not None and result.error.type == "BudgetExceeded"
    assert "the run was stopped: this run's budget of 1 seconds of running code" in (
        result.error.message
    )
    assert '"budget" -> "run" -> "wall_time"' in result.error.message


async def test_no_timeout_given_escapes_the_wall_time_budget(
    notes_ws: Any, open_notes: Any
) -> None:
    """NaN compares false with everything: ``wall_time < nan`` would leave it uncut."""
    notes_ws.configure({"budget": {"run": {"wall_time": 1}}})
    async with open_notes(notes_ws) as s:
        endless = await s.run("while True:\n    pass", timeout=float("inf"))
        with pytest.raises(ValueError, match="timeout"):
            await s.run("1", timeout=float("nan"))
        assert (await s.run("1")).value == 1
    assert endless.timed_out and endless.error is not None
    assert endless.error.type == "BudgetExceeded"


async def test_a_session_wall_time_budget_cuts_the_last_run_and_refuses_the_next(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"budget": {"session": {"wall_time": 2}}})
    async with open_notes(notes_ws) as s:
        first = await s.run("import time\ntime.sleep(1.2)")
        second = await s.run("import time\ntime.sleep(5)", timeout=60)
        third = await s.run("1 + 1")
    assert first.error is None
    assert second.timed_out and second.error is not None
    assert "this session's budget of 2 seconds of running code" in second.error.message
    assert third.error is not None and third.error.type == "BudgetExceeded"
    assert "budget.session.wall_time" in third.error.message


async def test_waiting_for_a_person_does_not_count_as_running_time(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"policy": {"destructive": "ask"}, "budget": {"session": {"wall_time": 3}}})

    async def slow_person(request: ApprovalRequest) -> bool:
        await asyncio.sleep(4)
        return True

    async with open_notes(notes_ws, approve=slow_person) as s:
        await s.tools.list("notes")
        approved = await s.run("tools.notes.delete_note(name='hello')")
        after = await s.run("2 + 2")
    assert approved.value == "deleted" and approved.duration_ms > 4000
    assert after.value == 4


async def test_output_over_the_run_budget_is_cut_with_an_error(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"budget": {"run": {"output_bytes": 100}}})
    async with open_notes(notes_ws) as s:
        result = await s.run("print('x' * 1000)\n'the value'")
    assert result.error is not None and result.error.type == "BudgetExceeded"
    assert "the output was cut: this run's budget of 100 bytes of output" in result.error.message
    assert result.stdout == "x" * 100 and result.stdout_truncated and not result.has_value


async def test_a_thread_left_running_after_its_run_spends_that_runs_budget_not_none(
    notes_ws: Any, open_notes: Any, tmp_path: Any
) -> None:
    """Calls made between runs, by a thread the code left running, count in the run that
    ended last: without that, a per-run limit (``"tools": {"mail.send_*": 1}``) held only
    for code that did not start a thread."""
    notes_ws.configure({"budget": {"run": {"tool_calls": 2}}})
    done = tmp_path / "thread-done"
    code = (
        "import threading, time\n"
        "outcomes = []\n"
        "def later():\n"
        "    time.sleep(0.5)\n"  # the run has ended by then
        "    for i in range(3):\n"
        "        try:\n"
        "            tools.notes.write_note(name=f'later{i}', text='x')\n"
        "            outcomes.append('ok')\n"
        "        except BudgetExceeded as e:\n"
        "            outcomes.append(e.budget)\n"
        f"    open({str(done)!r}, 'w').close()\n"
        "threading.Thread(target=later, daemon=True).start()\n"
        "tools.notes.read_note(name='hello')"
    )
    async with open_notes(notes_ws) as s:
        first = await s.run(code)
        with anyio.fail_after(20):
            while not done.exists():
                await anyio.sleep(0.05)
        later = await s.run("outcomes")
        fresh = await s.run(calls(3))
    assert first.error is None, first.to_text()
    assert later.value == ["ok"] + ["budget.run.tool_calls"] * 2  # 1 + 1 of the run's 2
    assert fresh.value[0] == 2  # the next run has its own budget
    assert notes_ws.calls().count("write_note") == 1


async def test_calls_before_the_first_run_spend_a_budget_of_the_sessions_start(
    notes_ws: Any, open_notes: Any, tmp_path: Any
) -> None:
    """An object a restored checkpoint brings back can start calling before the session's
    first run: those calls count in a stand-in run of the session's start, not in none."""
    from codemode.checkpoint import Checkpoints
    from codemode.storage import FileStorage

    notes_ws.configure({"budget": {"run": {"tool_calls": 2}}})
    done = tmp_path / "thread-done"
    code = (  # (the restored namespace is not complete yet when __setstate__ runs)
        "class Starter:\n"
        "    def __setstate__(self, state):\n"
        "        import threading\n"
        "        self.__dict__.update(state, outcomes=[])\n"
        "        threading.Thread(target=self.later, daemon=True).start()\n"
        "    def later(self):\n"
        "        import time\n"
        "        time.sleep(0.5)\n"
        "        for i in range(3):\n"
        "            try:\n"
        "                tools.notes.write_note(name=f'early{i}', text='x')\n"
        "                self.outcomes.append('ok')\n"
        "            except BudgetExceeded as e:\n"
        "                self.outcomes.append(e.budget)\n"
        "            except Exception as e:\n"
        "                self.outcomes.append(repr(e))\n"
        f"        open({str(done)!r}, 'w').close()\n"
        "starter = Starter()\n"
        "starter.x = 1\n"
    )
    store = Checkpoints(FileStorage(tmp_path / "store"), "agent-early")
    async with open_notes(notes_ws, checkpoints=store) as s:
        saved = await s.run(code)
    assert saved.error is None, saved.to_text()
    async with open_notes(notes_ws, checkpoints=store) as s:
        await s.start()  # the checkpoint is restored: its object starts calling
        with anyio.fail_after(20):
            while not done.exists():
                await anyio.sleep(0.05)
        early = await s.run("starter.outcomes")
        fresh = await s.run(calls(3))
        session_id = s.context.session_id
    assert early.value == ["ok", "ok", "budget.run.tool_calls"]
    assert fresh.value[0] == 2  # the first run has its own budget
    assert notes_ws.calls().count("write_note") == 2
    assert session_id
