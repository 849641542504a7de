"""A server that breaks its own output schema does not break the agent's run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from codemode import Session, SubprocessExecutor
from codemode.config import ServerConfig
from codemode.tools.registry import ToolRegistry
from codemode.tools.sources.mcp import MCPSource

pytestmark = pytest.mark.anyio


async def test_schema_breaking_output_returns_the_data_and_the_run_carries_a_warning(
    make_source: Callable[..., MCPSource], edge_config: ServerConfig
) -> None:
    registry = ToolRegistry([make_source("edge", edge_config)])
    async with Session(SubprocessExecutor(), tools=registry) as s:
        r = await s.run("tools.edge.broken_schema(city='Rome')")
        assert r.is_ok, r.to_text()
        assert r.value == {"temperature": "warm", "city": "Rome"}
        assert any("broken_schema" in w for w in r.warnings)
        clean: Any = await s.run("1 + 1")
        assert clean.warnings == ()
