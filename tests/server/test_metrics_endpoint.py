"""``GET /metrics`` on a real ``codemode serve --transport http``: counts after a known
sequence of runs and tool calls, and the endpoint's own auth setting."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import httpx2
import pytest

if TYPE_CHECKING:  # mypy names the file by its path; pytest puts tests/ on sys.path
    from tests.observability.scrape import samples, value
else:
    from observability.scrape import samples, value

from .conftest import TOKEN, HttpServer, http_client, make_workspace, start_http_server

pytestmark = pytest.mark.anyio
METRICS_TOKEN = "metrics-only-token-42"


def metrics_url(server: HttpServer) -> str:
    return server.url.removesuffix("/mcp") + "/metrics"


def scrape(server: HttpServer, token: str | None = TOKEN) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx2.get(metrics_url(server), headers=headers, timeout=10)


def serve_with(tmp: Path, observability: dict[str, object]) -> HttpServer:
    base, files = make_workspace(tmp)
    (base / "config.json").write_text(json.dumps({"observability": observability}))
    server = start_http_server(base)
    server.files = files
    return server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    s = serve_with(tmp_path_factory.mktemp("metrics"), {})
    try:
        yield s
    finally:
        s.stop()


async def test_a_scrape_after_known_runs_and_tool_calls_shows_exact_counts(
    server: HttpServer,
) -> None:
    listing = f"tools.fs.list_directory(path={str(server.files)!r})"
    async with http_client(server.url) as client:
        await client.call_tool("run_code", {"code": f"a = {listing}\nb = {listing}\n'ok'"})
        await client.call_tool("run_code", {"code": "1 / 0"})
        await client.call_tool("run_code", {"code": "import time\ntime.sleep(0.3)"})
        live = scrape(server)
    text = scrape(server).text
    assert live.status_code == 200
    assert live.headers["content-type"].startswith("text/plain")
    assert value(live.text, "codemode_sessions_active") == 1
    assert value(text, "codemode_runs_total", outcome="ok") == 2
    assert value(text, "codemode_runs_total", outcome="error") == 1
    assert value(text, "codemode_run_errors_total", error_type="ZeroDivisionError") == 1
    assert value(text, "codemode_run_duration_seconds_count") == 3
    assert value(text, "codemode_run_duration_seconds_bucket", le="+Inf") == 3
    # The sleeping run lasts at least 0.3 s: it is in no bucket at or below 0.25 s.
    assert value(text, "codemode_run_duration_seconds_bucket", le="0.25") <= 2
    assert value(text, "codemode_run_duration_seconds_bucket", le="300.0") == 3
    calls = value(
        text, "codemode_tool_calls_total", server="fs", tool="list_directory", outcome="ok"
    )
    assert calls == 2
    hist = "codemode_tool_call_duration_seconds_bucket"
    assert value(text, hist, server="fs", tool="list_directory", le="+Inf") == 2
    received = "codemode_tool_call_received_bytes_total"
    assert value(text, received, server="fs", tool="list_directory") > 0
    assert value(text, "codemode_context_efficiency_ratio") > 0.5
    label_names = {k for _, labels in samples(text) for k, _ in labels}
    assert label_names <= {
        *("outcome", "error_type", "server", "tool", "le", "reason", "budget"),
        *("source", "method", "decision", "entity"),
    }


def test_sessions_created_expired_and_closed_are_counted(tmp_path: Path) -> None:
    base, _ = make_workspace(tmp_path)
    s = start_http_server(base, "--idle-timeout", "1")

    def wait_expired() -> str:
        deadline = time.monotonic() + 60
        text = scrape(s).text
        while value(text, "codemode_sessions_ended_total", reason="expired") < 1:
            assert time.monotonic() < deadline, "the idle session never expired"
            time.sleep(0.1)
            text = scrape(s).text
        return text

    async def runs() -> str:
        async with http_client(s.url) as idle:
            await idle.call_tool("run_code", {"code": "x = 1"})
            expired = await anyio.to_thread.run_sync(wait_expired)
        async with http_client(s.url) as ended:  # ends its session when it leaves
            await ended.call_tool("run_code", {"code": "x = 2"})
        return expired

    try:
        expired = anyio.run(runs)
        text = scrape(s).text
    finally:
        s.stop()
    assert value(expired, "codemode_sessions_created_total") == 1
    assert value(expired, "codemode_sessions_active") == 0
    assert value(text, "codemode_sessions_created_total") == 2
    assert value(text, "codemode_sessions_ended_total", reason="expired") == 1
    assert value(text, "codemode_sessions_ended_total", reason="closed") == 1
    acquired = "codemode_worker_acquire_seconds_count"
    assert value(text, acquired, source="pool") + value(text, acquired, source="spawn") == 2


def test_serve_freezes_what_it_built_at_start_out_of_the_collectors_scans(
    server: HttpServer,
) -> None:
    # Modules, the MCP SDK's models, the registry: tens of thousands of objects that a
    # full collection would otherwise rescan on every pass.
    assert value(scrape(server).text, "codemode_gc_frozen_objects") > 10_000


SETTLE = """
import gc, sys
from codemode.server.process import settle_collector
gc.set_threshold(int(sys.argv[1]), 10, 10)
settle_collector()
print(*gc.get_threshold(), gc.get_freeze_count() > 1000)
"""


@pytest.mark.parametrize(
    ("young", "after"),
    [(700, "10000 10 10 True"), (50_000, "50000 10 10 True"), (0, "0 10 10 True")],
)
def test_serve_makes_young_collections_rarer_unless_the_collector_is_off_or_rarer(
    young: int, after: str
) -> None:
    # A fresh interpreter: the collector's settings are the process's.
    out = subprocess.run(
        [sys.executable, "-c", SETTLE, str(young)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == after.split()


def test_metrics_need_the_servers_token_by_default(server: HttpServer) -> None:
    assert scrape(server, token=None).status_code == 401
    assert scrape(server, token="wrong").status_code == 401
    assert scrape(server).status_code == 200


def test_a_metrics_token_reads_metrics_and_nothing_else(tmp_path: Path) -> None:
    s = serve_with(tmp_path, {"metrics_auth": "token", "metrics_token": METRICS_TOKEN})
    try:
        assert scrape(s, token=METRICS_TOKEN).status_code == 200
        assert scrape(s, token=TOKEN).status_code == 401
        refused = scrape(s, token=None)
        mcp = httpx2.post(
            s.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            headers={
                "Authorization": f"Bearer {METRICS_TOKEN}",
                "Accept": "application/json, text/event-stream",
            },
            timeout=10,
        )
    finally:
        s.stop()
    assert refused.status_code == 401
    assert "metrics_token" in refused.json()["error_description"]
    assert mcp.status_code == 401


def test_metrics_auth_none_opens_only_metrics(tmp_path: Path) -> None:
    s = serve_with(tmp_path, {"metrics_auth": "none"})
    try:
        opened = scrape(s, token=None)
        mcp = httpx2.post(s.url, json={}, timeout=10)
    finally:
        s.stop()
    assert opened.status_code == 200
    assert "codemode_runs" in opened.text
    assert mcp.status_code == 401


def test_metrics_off_means_no_endpoint(tmp_path: Path) -> None:
    s = serve_with(tmp_path, {"metrics": False})
    try:
        assert scrape(s).status_code == 404
    finally:
        s.stop()


def search(server: HttpServer, token: str | None = TOKEN, **params: str) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    url = server.url.removesuffix("/mcp") + "/api/tools/search"
    return httpx2.get(url, params=params, headers=headers, timeout=30)


def test_the_tool_search_endpoint_ranks_tools_like_search_tools(server: HttpServer) -> None:
    got = search(server, query="list files in a directory", detail_level="description", limit="3")
    assert got.status_code == 200, got.text
    tools = got.json()["tools"]
    assert 1 <= len(tools) <= 3
    assert "fs.list_directory" in {t["name"] for t in tools}
    assert all("description" in t for t in tools)


def test_the_tool_search_endpoint_needs_the_token_and_names_bad_parameters(
    server: HttpServer,
) -> None:
    assert search(server, token=None, query="x").status_code == 401
    bad = search(server, query="x", detail_level="everything", limit="1000")
    assert bad.status_code == 400
    problems = " ".join(bad.json()["problems"])
    assert "detail_level must be one of name, description, full" in problems
    assert "limit must be a whole number from 1 to 100" in problems
    for odd in ("\u00b2", "9" * 5000, "-1", "1e3"):  # isdigit() but not int(); too long for int()
        answer = search(server, query="x", limit=odd)
        assert answer.status_code == 400, (odd[:10], answer.status_code)
