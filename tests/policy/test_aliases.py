"""Rules name tools as discovery shows them too: a tool the code calls by a name the
registry gave it (a server named like a method of ``tools`` gets ``_``; a name that
collides after mapping gets ``_2``) is matched by that name, by policy and budgets alike."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from codemode import Session, SubprocessExecutor
from codemode.workspace import Workspace

pytestmark = pytest.mark.anyio

EDGE = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "edge_server.py"
TRY = """
try:
    tools.search_.echo(text="hi")
    outcome = "ran"
except (ToolDenied, BudgetExceeded) as e:
    outcome = type(e).__name__
outcome
"""


def workspace(base: Path, config: dict[str, Any]) -> Workspace:
    # "search" is a method of the code's ``tools``: the server is ``tools.search_``
    server = {"command": sys.executable, "args": [str(EDGE)], "trusted": True}
    (base / "mcp.json").write_text(json.dumps({"mcpServers": {"search": server}}))
    (base / "config.json").write_text(json.dumps(config))
    return Workspace.open(base)


async def outcomes(ws: Workspace, runs: int = 1) -> tuple[list[Any], list[str]]:
    """What ``runs`` attempts got, and the names discovery shows for "echo"."""
    async with Session.for_workspace(ws, executor=SubprocessExecutor()) as s:
        got = []
        for _ in range(runs):
            result = await s.run(TRY)
            assert result.error is None, result.error
            got.append(result.value)
        shown = await s.run("[t['name'] for t in tools.search('echo', detail='name')]")
    return got, shown.value


async def test_a_deny_rule_naming_the_tool_as_the_code_calls_it_denies_it(tmp_path: Path) -> None:
    rule = {"tools": "search_.echo", "action": "deny"}
    ws = workspace(tmp_path, {"policy": {"rules": [rule]}})
    assert await outcomes(ws) == (["ToolDenied"], [])  # and hidden from discovery


async def test_the_source_spelling_of_the_name_still_matches(tmp_path: Path) -> None:
    ws = workspace(tmp_path, {"policy": {"rules": [{"tools": "search.echo", "action": "deny"}]}})
    assert await outcomes(ws) == (["ToolDenied"], [])


async def test_a_per_tool_budget_naming_the_tool_as_the_code_calls_it_holds(
    tmp_path: Path,
) -> None:
    ws = workspace(tmp_path, {"budget": {"session": {"tools": {"search_.echo": 1}}}})
    assert await outcomes(ws, runs=2) == (["ran", "BudgetExceeded"], ["search_.echo"])


async def test_a_rule_follows_a_server_renamed_after_its_tools_were_listed() -> None:
    """Adding server ``my_mail`` renames an earlier ``my-mail`` to ``tools.my_mail_2``: its
    tools, already listed as ``my_mail.send``, must match rules by the new name too."""
    from codemode.policy.rules import Policy, PolicyConfig, Rule
    from codemode.tools.registry import ToolRegistry

    def send(to: str) -> str:
        """Send mail."""
        return f"sent to {to}"

    reg = ToolRegistry()
    reg.register(send, server="my-mail")
    assert (await reg.resolve("my_mail", "send")).spec.server == "my-mail"  # listed now
    reg.register(send, server="my_mail")  # takes the name: my-mail is now my_mail_2
    renamed = await reg.resolve("my_mail_2", "send")
    assert renamed.spec.server == "my-mail"
    policy = Policy(PolicyConfig(rules=(Rule(tools=("my_mail_2.send",), action="deny"),)))
    assert policy.decide(renamed.spec).action == "deny"


async def test_an_approval_names_the_tool_as_the_code_calls_it(tmp_path: Path) -> None:
    """The person asked sees ``search_.echo``, the name the code used (and that a rule
    names), not ``search.echo``: for ``send_mail_2`` that was the name of another tool."""
    from codemode.approval import ApprovalRequest

    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    ws = workspace(tmp_path, {"policy": {"rules": [{"tools": "search_.echo", "action": "ask"}]}})
    async with Session.for_workspace(ws, executor=SubprocessExecutor(), approve=approve) as s:
        result = await s.run('tools.search_.echo(text="hi")')
    await ws.registry().aclose()
    assert result.error is None, result.error
    assert [a.qualified for a in asked] == ["search_.echo"]
