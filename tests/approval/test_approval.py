"""Approval through the SDK: a callback says yes or no before calls the policy marks ``ask``;
the wait holds the run's timeout; answers can be remembered for the session."""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

import pytest

from codemode import InProcessExecutor, SubprocessExecutor
from codemode.approval import Approval, ApprovalRequest

pytestmark = pytest.mark.anyio

ASK_DESTRUCTIVE = {"policy": {"destructive": "ask"}}
DELETE = """
try:
    out = tools.notes.delete_note(name="hello")
except ToolDenied as e:
    out = ("denied", e.reason, str(e))
out
"""


class Recorder:
    """An async approver that answers from a script and records what it was asked."""

    def __init__(self, *answers: Approval | bool) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> Approval | bool:
        self.asked.append(request)
        return self.answers.pop(0) if self.answers else False


async def test_a_callback_that_approves_lets_the_call_run_and_sees_what_it_approves(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure(ASK_DESTRUCTIVE)
    approver = Recorder(True)
    async with open_notes(notes_ws, approve=approver) as s:
        result = await s.run(DELETE)
    assert result.value == "deleted"
    [asked] = approver.asked
    assert (asked.server, asked.tool, dict(asked.arguments)) == (
        "notes",
        "delete_note",
        {"name": "hello"},
    )
    assert '"destructive": "ask"' in asked.reason
    assert asked.context.session_id == s.context.session_id and asked.context.run_id
    assert notes_ws.calls() == ["delete_note"]


async def test_a_refusal_raises_ToolDenied_and_nothing_reaches_the_server(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure(ASK_DESTRUCTIVE)
    async with open_notes(notes_ws, approve=Recorder(Approval(False, reason="not today"))) as s:
        result = await s.run(DELETE)
        read = await s.run("tools.notes.read_note(name='hello')")
    assert result.value[0:2] == ["denied", "approval"]
    assert "not approved: not today" in result.value[2]
    assert read.value == "hello world"  # read-only: no question asked
    assert notes_ws.calls() == ["read_note"]


async def test_a_remembered_answer_holds_for_that_tool_for_the_rest_of_the_session_only(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure(ASK_DESTRUCTIVE)
    first = Recorder(Approval(True, remember=True))
    async with open_notes(notes_ws, approve=first) as s:
        await s.run("tools.notes.delete_note(name='a')\ntools.notes.delete_note(name='b')")
        await s.run("tools.notes.delete_note(name='c')")
        other = await s.run("tools.notes.plain(x=3)")
    assert len(first.asked) == 2  # once for delete_note, once for plain
    assert other.error is not None and other.error.type == "ToolDenied"
    second = Recorder(True)
    async with open_notes(notes_ws, approve=second) as s:
        await s.run("tools.notes.delete_note(name='d')")
    assert len(second.asked) == 1  # a new session asks again


async def test_questions_of_one_session_are_asked_one_at_a_time(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure(ASK_DESTRUCTIVE)
    busy = 0
    overlap = False

    async def approver(request: ApprovalRequest) -> Approval:
        nonlocal busy, overlap
        busy += 1
        overlap = overlap or busy > 1
        await asyncio.sleep(0.05)
        busy -= 1
        return Approval(True, remember=True)

    code = (
        "import asyncio\n"
        "names = [f'n{i}' for i in range(5)]\n"
        "await asyncio.gather(*(tools.notes.delete_note.aio(name=n) for n in names))"
    )
    async with open_notes(notes_ws, approve=approver) as s:
        result = await s.run(code)
    assert result.error is None, result.error
    assert not overlap
    assert notes_ws.calls().count("delete_note") == 5


async def test_without_an_approver_the_call_is_denied_saying_how_to_get_one(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure(ASK_DESTRUCTIVE)
    async with open_notes(notes_ws) as s:
        result = await s.run(DELETE)
    assert "no one can approve calls in this session" in result.value[2]
    assert "Session(..., approve=callback)" in result.value[2]
    assert notes_ws.calls() == []


@pytest.mark.parametrize("executor", [SubprocessExecutor, InProcessExecutor])
async def test_waiting_for_a_person_does_not_consume_the_run_timeout(
    notes_ws: Any, open_notes: Any, executor: Any
) -> None:
    notes_ws.configure(ASK_DESTRUCTIVE)

    async def slow_person(request: ApprovalRequest) -> bool:
        await asyncio.sleep(4.0)  # twice the run's timeout
        return True

    async with open_notes(notes_ws, approve=slow_person, executor=executor()) as s:
        await s.tools.list("notes")  # the server is up before the timed run
        result = await s.run(DELETE, timeout=2.0)
        # The timer resumes after the answer: code that then spins still times out.
        spin = await s.run(DELETE + "\nwhile True:\n    pass", timeout=2.0)
    assert result.error is None and not result.timed_out, result.error
    assert result.value == "deleted"
    assert result.duration_ms > 4000
    assert spin.timed_out


async def test_an_unanswered_question_is_refused_after_the_approval_timeout(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({**ASK_DESTRUCTIVE, "approval": {"timeout": 0.5}})

    async def never(request: ApprovalRequest) -> bool:
        await asyncio.Event().wait()
        return True

    async with open_notes(notes_ws, approve=never) as s:
        result = await s.run(DELETE, timeout=30)
    assert "no answer within 0.5 s (the workspace's approval.timeout)" in result.value[2]
    assert notes_ws.calls() == []


async def test_a_plain_function_approver_runs_in_a_thread(notes_ws: Any, open_notes: Any) -> None:
    notes_ws.configure(ASK_DESTRUCTIVE)
    threads: list[str] = []

    def approver(request: ApprovalRequest) -> bool:
        threads.append(threading.current_thread().name)
        return True

    async with open_notes(notes_ws, approve=approver) as s:
        result = await s.run(DELETE)
    assert result.value == "deleted"
    assert threads and threads[0] != threading.main_thread().name


async def test_an_approver_that_fails_or_answers_nonsense_refuses(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure(ASK_DESTRUCTIVE)

    async def broken(request: ApprovalRequest) -> bool:
        raise RuntimeError("the approval service is down")

    async def nonsense(request: ApprovalRequest) -> Any:
        return "sure"

    async with open_notes(notes_ws, approve=broken) as s:
        failed = await s.run(DELETE)
        s.approve = nonsense
        odd = await s.run(DELETE)
    assert "the approver failed: the approval service is down" in failed.value[2]
    assert "returned str, not an Approval or a bool" in odd.value[2]
    assert notes_ws.calls() == []


async def test_a_question_waiting_for_a_person_is_listed_as_pending_without_its_arguments(
    notes_ws: Any, open_notes: Any
) -> None:
    from codemode.approval.layer import pending_approvals

    notes_ws.configure(ASK_DESTRUCTIVE)
    seen: list[list[dict[str, Any]]] = []

    async def approver(request: ApprovalRequest) -> bool:
        seen.append(pending_approvals())
        return True

    async with open_notes(notes_ws, approve=approver) as s:
        await s.run(DELETE)
    [[pending]] = seen
    assert (pending["server"], pending["tool"]) == ("notes", "delete_note")
    assert "hello" not in repr(pending)
    assert pending_approvals() == []


async def test_the_call_a_person_is_shown_cannot_be_rewritten_by_control_characters(
    notes_ws: Any, open_notes: Any
) -> None:
    """Names and values of arguments are the code's: ``ESC [2K``, ``CR`` or a bidi override
    in them would redraw the prompt as a harmless-looking call."""
    notes_ws.configure(ASK_DESTRUCTIVE)
    approver = Recorder(False)
    spoof = "\x1b[2K\r\x1b[1Anotes.read_note(name='hello')\u202e"
    async with open_notes(notes_ws, approve=approver) as s:
        await s.run(f"tools.notes.delete_note(name='hello', **{{{spoof!r}: {spoof!r}}})")
    [asked] = approver.asked
    shown = asked.describe()
    assert shown.startswith("notes.delete_note(name=")
    assert shown.isprintable() and "\\u001b[2K\\u000d\\u001b[1A" in shown
    assert "\\u202e" in shown


async def test_a_long_argument_cannot_push_the_others_out_of_the_person_s_view(
    notes_ws: Any, open_notes: Any
) -> None:
    """The prompt is bounded; what is cut is each long value, never an argument: code that
    sends a long harmless value first must not hide the one that matters after it."""
    notes_ws.configure(ASK_DESTRUCTIVE)
    approver = Recorder(False)
    async with open_notes(notes_ws, approve=approver) as s:
        await s.run("tools.notes.delete_note(padding='x' * 5000, name='the-real-target')")
    [asked] = approver.asked
    shown = asked.describe()
    assert "padding=" in shown and 'name="the-real-target"' in shown, shown
    assert len(shown) <= 600 and "long values cut" in shown


def test_a_prompt_with_more_arguments_than_fit_says_how_many_there_are() -> None:
    from codemode.approval import ApprovalRequest

    many = {f"a{i}": "v" * 50 for i in range(200)}
    shown = ApprovalRequest("s", "t", {**many, "zz_last": "1"}, "").describe()
    assert len(shown) <= 600 and "201 arguments" in shown and "more" in shown, shown


ASK_OUTSIDE = {
    "policy": {
        "rules": [
            {
                "tools": "notes.write_note",
                "action": "ask",
                "args": {"name": {"not_matches": "*@example.com"}},
            }
        ]
    }
}


def write(name: Any) -> str:
    return (
        "try:\n"
        f"    out = tools.notes.write_note(name={name!r}, text='x')\n"
        "except ToolDenied as e:\n"
        "    out = 'denied'\n"
        "out"
    )


async def test_a_remembered_yes_to_a_rule_on_arguments_covers_only_the_values_that_asked(
    notes_ws: Any, open_notes: Any
) -> None:
    """A yes with ``remember`` to one outside recipient is no yes to another: the question
    was about that value."""
    notes_ws.configure(ASK_OUTSIDE)
    person = Recorder(Approval(True, remember=True), False, False)
    async with open_notes(notes_ws, approve=person) as s:
        first = await s.run(write("a@rival.example"))
        again = await s.run(write("a@rival.example"))
        other = await s.run(write("b@rival.example"))
        more = await s.run(write(["a@rival.example", "b@rival.example"]))
        inside = await s.run(write("c@example.com"))
    assert [r.value for r in (first, again, other, more)] == ["ok"] * 2 + ["denied"] * 2
    assert inside.error is None and inside.value == "ok"
    asked = [dict(r.arguments)["name"] for r in person.asked]
    assert asked == ["a@rival.example", "b@rival.example", ["a@rival.example", "b@rival.example"]]
    assert notes_ws.calls() == ["write_note"] * 3


async def test_a_remembered_yes_about_the_tool_does_not_answer_a_rule_on_its_arguments(
    notes_ws: Any, open_notes: Any
) -> None:
    """Tool-wide questions stay tool-wide; a rule on values still asks about its values."""
    rules = [
        {"tools": "notes.write_note", "action": "ask", "args": {"name": {"matches": "*@*"}}},
        {"tools": "notes.write_note", "action": "ask"},
    ]
    notes_ws.configure({"policy": {"rules": rules}})
    person = Recorder(Approval(True, remember=True), False)
    async with open_notes(notes_ws, approve=person) as s:
        tool = [(await s.run(write(n))).value for n in ("plain", "other", "third")]
        valued = await s.run(write("x@rival.example"))
    assert tool == ["ok"] * 3 and valued.value == "denied"
    assert [dict(r.arguments)["name"] for r in person.asked] == ["plain", "x@rival.example"]


async def test_a_remembered_no_to_a_rule_on_arguments_holds_for_every_value_it_asks_about(
    notes_ws: Any, open_notes: Any
) -> None:
    """A refusal can only refuse more: code that tries one outside address after another
    does not make the person answer again for each."""
    notes_ws.configure(ASK_OUTSIDE)
    person = Recorder(Approval(False, remember=True, reason="no outside names"), True)
    async with open_notes(notes_ws, approve=person) as s:
        tried = [(await s.run(write(f"{c}@rival.example"))).value for c in "abc"]
        inside = await s.run(write("d@example.com"))
    assert tried == ["denied"] * 3 and inside.value == "ok"
    assert len(person.asked) == 1
    assert notes_ws.calls() == ["write_note"]


async def test_a_remembered_yes_does_not_cover_another_argument_a_later_rule_asks_about(
    notes_ws: Any, open_notes: Any
) -> None:
    """Asked because of ``name``, the person saw and approved ``text`` too: a new ``text``
    that a second rule asks about is a new question, though the first rule decides."""
    rules = [
        {"tools": "notes.write_note", "action": "ask", "args": {"name": {"matches": "*@*"}}},
        {"tools": "notes.write_note", "action": "ask", "args": {"text": {"matches": "*plan*"}}},
    ]
    notes_ws.configure({"policy": {"rules": rules}})
    person = Recorder(Approval(True, remember=True), False)

    def write_text(text: str) -> str:
        return (
            "try:\n"
            f"    out = tools.notes.write_note(name='a@rival.example', text={text!r})\n"
            "except ToolDenied:\n"
            "    out = 'denied'\n"
            "out"
        )

    async with open_notes(notes_ws, approve=person) as s:
        got = [(await s.run(write_text(t))).value for t in ("hi", "the plan", "hi")]
    assert got == ["ok", "denied", "ok"]
    assert [dict(r.arguments)["text"] for r in person.asked] == ["hi", "the plan"]


ASK_MANY = """
out = []
for n in range(5):
    try:
        out.append(tools.notes.delete_note(name=f"hello-{n}"))
    except ToolDenied as e:
        out.append(str(e))
out
"""


@pytest.mark.parametrize(
    ("approval", "left"),
    [
        ({"timeout": 0.4, "max_wait_per_run": 1.0}, r"0\.[12]\d*"),
        ({"timeout": 0.4}, r"0\.[34]\d*"),  # the default: three times the timeout
    ],
)
async def test_a_run_asking_again_and_again_is_refused_after_its_total_wait(
    notes_ws: Any, open_notes: Any, approval: dict[str, float], left: str
) -> None:
    notes_ws.configure({**ASK_DESTRUCTIVE, "approval": approval})
    asked: list[str] = []

    async def never(request: ApprovalRequest) -> bool:
        asked.append(request.arguments["name"])
        await asyncio.Event().wait()
        return True

    async with open_notes(notes_ws, approve=never) as s:
        result = await s.run(ASK_MANY, timeout=30)
        again = await s.run(ASK_MANY.replace("range(5)", "range(1)"), timeout=30)
    assert result.error is None, result.error
    first, second, last, *refused = result.value
    assert "no answer within 0.4 s (the workspace's approval.timeout)" in first + second
    # the third waits only what is left of the run's allowance
    assert re.search(
        rf"no answer within {left} s \(the workspace's approval.max_wait_per_run\)", last
    )
    assert len(refused) == 2 and asked[:3] == ["hello-0", "hello-1", "hello-2"]
    for text in refused:  # refused at once, without asking anyone
        assert "approval.max_wait_per_run" in text and "asks no more questions" in text
    assert len(asked) == 4 and "approval.timeout" in again.value[0]  # a new run: new allowance
    assert notes_ws.calls() == []
