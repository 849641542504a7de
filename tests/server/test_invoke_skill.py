"""``invoke_skill`` over MCP: a failing skill shows its own traceback, not codemode's glue."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import stdio_client
from .test_stdio import text_of

pytestmark = pytest.mark.anyio

BOOM = (
    "def run(name):\n    if name == 'bad':\n        raise ValueError('no ' + name)\n    return name"
)


async def test_a_failing_skill_shows_its_own_traceback(tmp_path: Path) -> None:
    async with stdio_client(tmp_path / "ws") as client:
        created = await client.call_tool(
            "create_skill", {"name": "boom", "code": BOOM, "description": "Fails on 'bad'."}
        )
        assert not created.is_error, text_of(created)
        ok = await client.call_tool("invoke_skill", {"name": "boom", "arguments": {"name": "x"}})
        failed = await client.call_tool(
            "invoke_skill", {"name": "boom", "arguments": {"name": "bad"}}
        )
        missing = await client.call_tool("invoke_skill", {"name": "nope"})
    assert text_of(ok) == "x"  # a parameter called `name` reaches the skill
    assert failed.is_error
    assert text_of(failed).splitlines() == [
        "Traceback (most recent call last):",
        '  File "<skill boom v1>", line 3, in run',
        "    raise ValueError('no ' + name)",
        "ValueError: no bad",
    ]
    assert missing.is_error
    assert text_of(missing).splitlines() == [
        "codemode_worker.errors.NotFound: no skill named 'nope'"
    ]  # no frame of the generated `skills.invoke(...)` line
