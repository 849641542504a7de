"""Every cut states the real size of what was cut, in one wording, wherever it happens.

``[... CUT of TOTAL characters truncated; how to get everything ...]``: the worker's output
capture, value reprs, tracebacks, error messages, a tool's error text, and the text a model
is shown (which may cut again what the worker already cut: the total stays the original).
"""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from codemode import Session, SubprocessExecutor
from codemode.config import parse_servers
from codemode.tools import ToolRegistry
from codemode.tools.sources.mcp import MCPSource

pytestmark = pytest.mark.anyio

EDGE = Path(__file__).resolve().parent / "fixtures" / "servers" / "edge_server.py"
MARKER = re.compile(r"\[\.\.\. ([\d,]+) of ([\d,]+) characters truncated(; [^\n]*)? \.\.\.\]")


def totals(text: str) -> list[int]:
    return [int(m.group(2).replace(",", "")) for m in MARKER.finditer(text)]


@pytest.fixture
async def session() -> AsyncIterator[Session]:
    config = parse_servers(
        {"mcpServers": {"edge": {"command": sys.executable, "args": [str(EDGE)]}}}
    )
    registry = ToolRegistry([MCPSource("edge", config["edge"])])
    async with Session(SubprocessExecutor(max_output=100_000), tools=registry) as s:
        yield s
    await registry.aclose()


async def test_printed_output_beyond_the_capture_states_how_much_was_printed(
    session: Session,
) -> None:
    r = await session.run("print('p' * 250_000, end='')")
    assert r.stdout_truncated
    assert r.stdout.endswith("\n[... 150,000 of 250,000 characters truncated ...]\n")
    assert totals(r.to_text()) == [250_000]  # shown cut again: still the real size
    assert totals(r.to_text(limit=None)) == [250_000]


async def test_a_huge_value_states_its_real_size_and_where_the_whole_value_is(
    session: Session,
) -> None:
    r = await session.run("list(range(2_000_000))")
    assert r.value_is_repr and r.value_truncated
    size = len(repr(list(range(2_000_000))))
    assert totals(r.value) == [size]
    assert "the whole value is `_` in the session" in r.value
    assert not r.value.rstrip().endswith("...")
    again = await session.run("len(_)")
    assert again.value == 2_000_000


async def test_a_huge_traceback_and_message_state_their_real_sizes(session: Session) -> None:
    r = await session.run("raise RuntimeError('m' * 70_000)")
    assert r.error is not None
    assert totals(r.error.message) == [70_000]
    assert len(totals(r.error.traceback)) == 1 and totals(r.error.traceback)[0] > 70_000


async def test_a_tools_huge_error_text_states_its_real_size(session: Session) -> None:
    code = (
        "import re\n"
        "try:\n    tools.edge.fail(message='f' * 90_000)\n"
        "except ToolError as e:\n"
        "    print(len(str(e)), re.findall(r'\\[\\.\\.\\. .*? \\.\\.\\.\\]', str(e)))"
    )
    r = await session.run(code)
    assert r.is_ok, r.to_text()
    length, _, markers = r.stdout.partition(" ")
    assert int(length) < 21_000
    assert markers.strip() == "['[... 70,000 of 90,000 characters truncated ...]']"


async def test_the_model_never_sees_a_bare_ellipsis_or_a_wrong_small_count(
    session: Session,
) -> None:
    r = await session.run("'y' * 5_000_000")
    text = r.to_text()
    assert totals(text) == [5_000_002]
    assert "[... 3 characters truncated ...]" not in text
