"""Rules on arguments find the argument at any depth and in every list item, and judge a
call with several values as the strictest of the calls with one value each: nesting a
recipient, or listing it next to an allowed one, neither slips past a deny nor onto an
allow-list."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.approval import Approval
from codemode.errors import ConfigError
from codemode.policy import Policy, PolicyConfig
from codemode.tools.spec import ToolSpec
from codemode.workspace import Workspace

pytestmark = pytest.mark.anyio

SENT: list[Any] = []


def send(to: Any = None, message: Any = None, recipients: Any = None, cc: Any = None) -> str:
    """A mail tool that takes recipients in every shape real ones do."""
    SENT.append({"to": to, "message": message, "recipients": recipients, "cc": cc})
    return "sent"


CALL = """
try:
    out = tools.mail.send({args})
except ToolDenied as e:
    out = "denied"
out
"""


async def sends(session: Any, *calls: str) -> list[Any]:
    out = []
    for args in calls:
        result = await session.run(CALL.format(args=args))
        assert result.error is None, result.error
        out.append(result.value)
    return out


async def outcomes(notes_ws: Any, open_notes: Any, config: Any, *calls: str) -> list[Any]:
    """Each call of ``mail.send`` under ``config``: "sent" or "denied"."""
    notes_ws.configure(config)
    SENT.clear()
    async with open_notes(notes_ws) as s:
        s.register_tool(send, server="mail", name="send")
        return await sends(s, *calls)


def rules(*given: dict[str, Any], default: str = "allow") -> dict[str, Any]:
    return {"policy": {"default": default, "rules": [{"tools": "mail.send", **r} for r in given]}}


async def test_a_deny_on_an_argument_holds_wherever_the_argument_is_nested(
    notes_ws: Any, open_notes: Any
) -> None:
    got = await outcomes(
        notes_ws,
        open_notes,
        rules({"action": "deny", "args": {"to": {"not_matches": "*@example.com"}}}),
        "message={'to': 'x@rival.example', 'subject': 'hi'}",
        "message={'headers': {'To': 'x@rival.example'}}",
        "recipients=[{'to': 'ok@example.com'}, {'TO': 'x@rival.example'}]",
        "message={'to': ['ok@example.com', 'x@rival\\u200b.example']}",
        "message={'to': 'ok@example.com'}, recipients=[{'to': 'b@example.com'}]",
    )
    assert got == ["denied"] * 4 + ["sent"]
    assert len(SENT) == 1


async def test_an_allow_list_must_hold_for_every_value_of_a_list(
    notes_ws: Any, open_notes: Any
) -> None:
    """An ``allow`` rule is an allow-list: a list that starts inside it, or one address of
    a header that reads as two, is not on it."""
    got = await outcomes(
        notes_ws,
        open_notes,
        rules({"action": "allow", "args": {"to": {"matches": "*@example.com"}}}, default="deny"),
        "to=['ok@example.com', 'x@rival.example']",
        "to='ok@example.com, x@rival.example'",
        "message={'to': ['a@example.com', 'x@rival.example']}",
        "to=['a@example.com', 'B@EXAMPLE.COM']",
        "message={'to': {'name': 'a@example.com', 'email': 'b@example.com'}}",
    )
    assert got == ["denied"] * 3 + ["sent"] * 2


async def test_a_dotted_path_names_an_argument_inside_others(
    notes_ws: Any, open_notes: Any
) -> None:
    """``recipients[].email`` looks at the emails of the recipients only, at any depth of
    the call, in any case; other ``email`` fields are left alone."""
    rule = {"action": "deny", "args": {"recipients[].email": {"not_matches": "*@example.com"}}}
    got = await outcomes(
        notes_ws,
        open_notes,
        rules(rule),
        "recipients=[{'email': 'a@example.com'}, {'email': 'x@rival.example'}]",
        "message={'Recipients': {'EMAIL': 'x@rival.example'}}",
        "recipients=[{'email': 'a@example.com'}], cc={'email': 'x@rival.example'}",
        "message={'recipients.email': 'x@rival.example'}",
    )
    assert got == ["denied", "denied", "sent", "denied"]


async def test_a_remembered_yes_covers_the_nested_values_that_asked_and_no_others(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure(rules({"action": "ask", "args": {"to": {"not_matches": "*@example.com"}}}))
    asked: list[Any] = []

    def person(request: Any) -> Approval:
        asked.append(dict(request.arguments))
        return Approval(len(asked) == 1, remember=len(asked) == 1)  # yes once, then no

    async with open_notes(notes_ws, approve=person) as s:
        s.register_tool(send, server="mail", name="send")
        got = await sends(
            s,
            "message={'to': 'a@rival.example', 'subject': 'one'}",
            "message={'to': 'a@rival.example', 'subject': 'two'}",
            "message={'to': 'b@rival.example'}",
            "message={'to': ['a@rival.example', 'c@rival.example']}",
        )
    assert got == ["sent", "sent", "denied", "denied"]
    assert len(asked) == 3


def test_a_call_with_too_many_value_groups_to_judge_is_refused() -> None:
    """Fourteen conditions whose values all differ: 2**14 readings. Refused, not judged."""
    names = [f"a{i}" for i in range(14)]
    cfg = PolicyConfig.model_validate(
        {
            "rules": [
                {
                    "tools": "m.t",
                    "action": "deny",
                    "args": {n: {"matches": "x"}, "z": {"matches": "z"}},
                }
                for n in names
            ]
        }
    )
    decide = Policy(cfg).for_tool(ToolSpec("m", "t")).for_args
    assert decide({n: ["x", "y"] for n in names}).action == "deny"
    assert "combinations" in decide({n: ["x", "y"] for n in names}).reason
    assert decide({n: "y" for n in names} | {"z": "z"}).action == "allow"


def test_a_malformed_argument_path_says_what_to_write(notes_ws: Any) -> None:
    for name in ("", "message..to", ".to"):
        rule = {"tools": "mail.send", "action": "deny", "args": {name: {"matches": "x"}}}
        notes_ws.configure({"policy": {"rules": [rule]}})
        with pytest.raises(ConfigError, match="a dotted path to one"):
            Workspace.open(notes_ws.base)
