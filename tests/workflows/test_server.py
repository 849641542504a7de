"""run_workflow on the MCP server: questions as elicitation, progress per step, resume."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp_types import ElicitResult

from codemode import Settings
from codemode.server import create_server

from .conftest import Space

pytestmark = pytest.mark.anyio

FLOW = """
name: ask-then-remember
steps:
  - ask: "Remember which name?"
    schema:
      type: object
      properties: {name: {type: string, description: The entity's name}}
      required: [name]
    output: picked
  - tool: memory.create_entities
    args: {entities: [{name: "${picked.name}", entityType: person, observations: [met]}]}
result: "${picked.name}"
"""


async def test_run_workflow_asks_the_client_and_reports_progress(space: Space) -> None:
    space.write("workflows/remember.yaml", FLOW)
    asked: list[dict[str, Any]] = []

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append({"message": params.message, "schema": params.requested_schema})
        return ElicitResult(action="accept", content={"name": "Ada"})

    messages: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message)

    server = create_server(Settings(executor="subprocess"), base=space.base)
    async with server, Client(server.mcp, elicitation_callback=elicit, mode="legacy") as client:
        result = await client.call_tool(
            "run_workflow", {"workflow": "remember.yaml"}, progress_callback=on_progress
        )
    assert not result.is_error, result.content
    data = result.structured_content
    assert data is not None and (data["status"], data["result"]) == ("succeeded", "Ada")
    assert asked[0]["message"] == "Remember which name?"
    assert asked[0]["schema"]["required"] == ["name"]
    assert space.entities() == ["Ada"]
    assert messages == ["step1 ask: done", "step2 tool memory.create_entities: done"]


async def test_without_elicitation_the_run_waits_and_resumes_with_the_answer(
    space: Space,
) -> None:
    server = create_server(Settings(executor="subprocess"), base=space.base)
    async with server, Client(server.mcp) as client:
        first = await client.call_tool("run_workflow", {"workflow": FLOW})
        data = first.structured_content
        assert data is not None and (data["status"], data["step"]) == ("waiting", "step1")
        assert space.entities() == []
        second = await client.call_tool(
            "run_workflow", {"resume": data["run_id"], "answers": {"step1": {"name": "Bob"}}}
        )
        assert second.structured_content is not None
        assert second.structured_content["status"] == "succeeded"
        bad = await client.call_tool("run_workflow", {"workflow": "../../etc/passwd"})
        assert bad.is_error
        pairs = zip("abcdefgh", "bcdefghi", strict=True)
        levels = "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in pairs)
        laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + levels + "steps: [{code: '1'}]\n"
        bomb = await client.call_tool("run_workflow", {"workflow": laughs})
        assert bomb.is_error and "aliases" in str(bomb.content)
    assert space.entities() == ["Bob"]


async def test_a_workflow_sent_by_a_client_cannot_build_a_huge_value_from_shared_parts(
    space: Space,
) -> None:
    """A 16-character expression printing to 9,000,000 items (copies of one list) fails
    its step, instead of holding the server's event loop for seconds to weigh it and
    journaling a 27 MB output."""
    flow = {
        "name": "shared-parts",
        "steps": [{"set": {"x": "${[[1] * 3000] * 3000}"}}, {"set": {"y": "${len(x)}"}}],
    }
    server = create_server(Settings(executor="subprocess"), base=space.base)
    async with server, Client(server.mcp) as client:
        result = await client.call_tool("run_workflow", {"workflow": flow})
    data = result.structured_content
    assert result.is_error and data is not None and data["status"] == "failed", data
    assert "more than 1000000 items" in str(data["error"])


async def test_a_value_with_a_lone_surrogate_is_journaled_and_read_back(space: Space) -> None:
    """Tools' JSON can hold ``"\\udc80"``, which no UTF-8 text can: the journal writes it
    escaped instead of failing the run with an encoding error (which left it "running")."""
    flow = {
        "name": "surrogate",
        "steps": [{"set": {"x": "${'a' + '\\udc80'}"}}, {"set": {"n": "${len(x)}"}}],
        "result": "${x}",
    }
    server = create_server(Settings(executor="subprocess"), base=space.base)
    async with server, Client(server.mcp) as client:
        first = await client.call_tool("run_workflow", {"workflow": flow})
        data = first.structured_content
        assert not first.is_error and data is not None, first.content
        assert (data["status"], data["result"]) == ("succeeded", "a\udc80")
        again = await client.call_tool("run_workflow", {"resume": data["run_id"]})
    assert again.structured_content is not None
    assert again.structured_content["result"] == "a\udc80"  # read back from the journal
