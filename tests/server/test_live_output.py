"""``run_code`` streams what a cell prints to the official MCP client as it is printed."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from .conftest import HttpServer, http_client, make_workspace, start_http_server, stdio_client
from .test_stdio import text_of

pytestmark = pytest.mark.anyio

CELL = (
    "import time\n"
    "for i in range(4):\n"
    "    print(f'step {i}', flush=True)\n"
    "    time.sleep(1)\n"
    "'finished'"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    base, _ = make_workspace(tmp_path_factory.mktemp("live"))
    s = start_http_server(base)
    try:
        yield s
    finally:
        s.stop()


async def test_an_http_client_gets_progress_notes_of_a_cell_that_prints_for_seconds(
    server: HttpServer,
) -> None:
    notes: list[tuple[float, float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append((time.monotonic(), progress, message))

    async with http_client(server.url) as client:
        start = time.monotonic()
        result = await client.call_tool("run_code", {"code": CELL}, progress_callback=on_progress)
        ended = time.monotonic()
    assert "finished" in text_of(result)
    assert "".join(m or "" for _, _, m in notes) == "".join(f"step {i}\n" for i in range(4))
    assert [p for _, p, _ in notes] == sorted(p for _, p, _ in notes)  # progress only grows
    assert notes[0][0] - start < ended - start - 2  # the first came seconds before the result


async def test_a_stdio_client_gets_them_too(tmp_path: object) -> None:
    from pathlib import Path

    base, _ = make_workspace(Path(str(tmp_path)))
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async with stdio_client(base) as client:
        code = "print('a', flush=True)\nimport time\ntime.sleep(0.2)\nprint('b')"
        await client.call_tool("run_code", {"code": code}, progress_callback=on_progress)
    assert "".join(messages) == "a\nb\n"


async def test_a_client_that_asks_for_no_progress_gets_the_result_unchanged(
    server: HttpServer,
) -> None:
    async with http_client(server.url) as client:
        result = await client.call_tool("run_code", {"code": "print('quiet')\n5"})
    assert text_of(result) == "quiet\n5"


async def test_streamed_output_stops_at_the_servers_output_limit(tmp_path: object) -> None:
    from pathlib import Path

    base, _ = make_workspace(Path(str(tmp_path)))
    (base / "config.json").write_text('{"output_limit": 1000}')
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async with stdio_client(base) as client:
        code = "for i in range(50):\n    print('z' * 99)"
        await client.call_tool("run_code", {"code": code}, progress_callback=on_progress)
    assert "".join(messages) == ("z" * 99 + "\n") * 10
