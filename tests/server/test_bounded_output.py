"""Everything a client of ``codemode serve`` receives is bounded, and the cut says so honestly.

Driven through a real ``codemode serve`` process with the official MCP client: the text and
the structured content of every tool stay within ``output_limit``; a marker states the real
original size and how to get everything; the full output of a run is saved as an artifact.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from .conftest import stdio_client
from .test_stdio import text_of

pytestmark = pytest.mark.anyio

LIMIT = 20_000


def structured_size(result: Any) -> int:
    return len(json.dumps(result.structured_content, ensure_ascii=False))


async def test_a_million_printed_characters_reach_the_client_bounded_in_text_and_structure(
    tmp_path: Path,
) -> None:
    async with stdio_client(tmp_path / "ws") as client:
        result = await client.call_tool("run_code", {"code": "print('x' * 1_000_000)"})
        data = result.structured_content
        assert data is not None
        name = data["full_output"]
        again = await client.call_tool("run_code", {"code": f"artifacts.load({name!r}).count('x')"})
    text = text_of(result)
    assert len(text) <= LIMIT
    assert structured_size(result) <= 2 * LIMIT
    assert len(data["stdout"]) <= LIMIT
    assert data["truncated"] == ["stdout"]
    assert data["sizes"] == {"stdout": 1_000_001}
    assert re.match(r"run-output-\d{8}-\d{6}-[0-9a-f]{6}$", name)
    note = re.compile(
        r"\[\.\.\. ([\d,]+) of 1,000,001 characters truncated; "
        + re.escape(f"full output: artifacts.load({name!r}) in run_code ...]")
    )
    found = note.search(text)
    assert found is not None and note.search(data["stdout"]) is not None
    cut = int(found.group(1).replace(",", ""))
    assert cut >= 980_001 and text.count("x") + cut in (1_000_000, 1_000_001)
    assert text_of(again) == "1000000"  # all the worker kept (its own marker says so)


async def test_a_five_megabyte_value_states_its_real_size_not_the_size_of_a_cut_copy(
    tmp_path: Path,
) -> None:
    async with stdio_client(tmp_path / "ws") as client:
        result = await client.call_tool("run_code", {"code": "'y' * 5_000_000"})
    text = text_of(result)
    assert "of 5,000,002 characters truncated" in text  # the repr's quotes count too
    assert "the whole value is `_` in the session" in text
    assert "[... 3 characters truncated" not in text and not re.search(r"y\.\.\.$", text)
    assert len(text) <= LIMIT and structured_size(result) <= 2 * LIMIT


async def test_output_beyond_the_workers_capture_is_reported_with_its_real_size(
    tmp_path: Path,
) -> None:
    async with stdio_client(tmp_path / "ws") as client:
        result = await client.call_tool(
            "run_code", {"code": "for _ in range(5): print('z' * 999_999)"}
        )
    data = result.structured_content
    assert data is not None
    assert data["sizes"] == {"stdout": 5_000_000}
    assert "of 5,000,000 characters truncated" in text_of(result)


async def test_an_error_with_a_huge_message_is_bounded_everywhere(tmp_path: Path) -> None:
    async with stdio_client(tmp_path / "ws") as client:
        result = await client.call_tool("run_code", {"code": "raise ValueError('e' * 3_000_000)"})
    assert result.is_error
    data = result.structured_content
    assert data is not None and data["error"]["type"] == "ValueError"
    assert len(text_of(result)) <= LIMIT
    assert structured_size(result) <= 2 * LIMIT
    assert "of 3,000,000 characters truncated" in data["error"]["message"]


async def test_memory_tools_bound_large_artifacts_and_state_and_say_how_to_read_them(
    tmp_path: Path,
) -> None:
    code = (
        "artifacts.save('big', 'a' * 3_000_000)\n"
        "artifacts.save('rows', [{'i': i, 'text': 'r' * 50} for i in range(50_000)])\n"
        "state.set('blob', 'b' * 900_000)"
    )
    async with stdio_client(tmp_path / "ws") as client:
        saved = await client.call_tool("run_code", {"code": code})
        assert not saved.is_error, text_of(saved)
        big = await client.call_tool("load_artifact", {"name": "big"})
        rows = await client.call_tool("load_artifact", {"name": "rows"})
        state = await client.call_tool("get_state", {})
    for reply in (big, rows, state):
        assert len(text_of(reply)) <= LIMIT
        assert structured_size(reply) <= 2 * LIMIT
    assert "of 3,000,000 characters truncated; read it in parts in run_code: " in text_of(big)
    assert "artifacts.load('big')" in text_of(big)
    rows_data = rows.structured_content
    assert rows_data is not None
    assert rows_data["info"]["name"] == "rows"
    assert (
        "read it in parts in run_code: artifacts.load('rows')" in rows_data["how_to_get_everything"]
    )
    assert "get_state(key=...)" in text_of(state)


async def test_the_output_limit_is_configurable(tmp_path: Path) -> None:
    base = tmp_path / "ws"
    base.mkdir()
    (base / "config.json").write_text(json.dumps({"output_limit": 5_000}))
    async with stdio_client(base) as client:
        result = await client.call_tool("run_code", {"code": "print('q' * 50_000)"})
    assert len(text_of(result)) <= 5_000
    assert "of 50,001 characters truncated" in text_of(result)
