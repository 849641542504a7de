"""docs/coming-from-seeds.md, row by row (rows tested elsewhere name their test there)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from codemode import FileStorage, Session, Settings, SubprocessExecutor, execute_task
from codemode.server import create_server

pytestmark = pytest.mark.anyio

PY_CODE_MODE_TOOLS = {
    "run_code", "list_tools", "search_tools", "list_skills", "search_skills",
    "create_skill", "delete_skill", "list_artifacts", "list_deps", "add_dep", "remove_dep",
}  # fmt: skip
CODE_EXECUTION_MCP_TOOLS = {
    "execute_task", "list_available_tools", "get_state", "save_state", "list_servers",
    "get_server_tools", "search_tools",
}  # fmt: skip


async def test_every_seed_mcp_tool_name_is_served_by_the_all_profile(tmp_path: Path) -> None:
    server = create_server(Settings(executor="subprocess"), base=tmp_path)
    async with server, Client(server.mcp) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert names >= PY_CODE_MODE_TOOLS
    assert names >= CODE_EXECUTION_MCP_TOOLS


async def test_py_code_modes_namespaces_work_in_the_code(tmp_path: Path) -> None:
    def get(url: str) -> str:
        return f"<html>{url}</html>"

    async with Session(
        storage=FileStorage(base_path=tmp_path), executor=SubprocessExecutor()
    ) as session:
        session.register_tool(get, server="curl")
        r = await session.run(
            "skills.create('fetch_len', 'def run(url):\\n    return len(tools.curl.get(url=url))',"
            " description='Length of a page')\n"
            "n = skills.invoke('fetch_len', url='x')\n"
            "artifacts.save('n', n)\n"
            "artifacts.load('n')"
        )
        assert r.is_ok, r.error
        assert r.value == len("<html>x</html>")


def test_execute_task_still_unpacks_into_result_output_error(tmp_path: Path) -> None:
    result, output, error = execute_task(
        "say hi", base=str(tmp_path), executor="subprocess", llm_enabled=False
    )
    assert result is None and isinstance(output, str)
    assert error  # no model is configured: the task fails, saying how to configure one
