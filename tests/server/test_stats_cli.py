"""``codemode stats`` against a real ``codemode serve --transport http``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from .conftest import TOKEN, HttpServer, http_client, make_workspace, start_http_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    base, files = make_workspace(tmp_path_factory.mktemp("stats"))
    s = start_http_server(base)
    s.files = files

    async def runs() -> None:
        listing = f"tools.fs.list_directory(path={str(files)!r})"
        async with http_client(s.url) as client:
            await client.call_tool("run_code", {"code": f"{listing}\n{listing}\n'ok'"})
            await client.call_tool("run_code", {"code": "1 / 0"})

    try:
        anyio.run(runs)
        yield s
    finally:
        s.stop()


def stats(
    server: HttpServer, *args: str, token: str | None = TOKEN
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CODEMODE_TOKEN", "CODEMODE_URL")}
    if token is not None:
        env["CODEMODE_TOKEN"] = token
    url = server.url.removesuffix("/mcp")
    return subprocess.run(
        [sys.executable, "-m", "codemode", "stats", "--url", url, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_stats_prints_the_servers_runs_and_tool_calls_as_a_table(server: HttpServer) -> None:
    out = stats(server)
    assert out.returncode == 0, out.stderr
    lines = [line.split() for line in out.stdout.splitlines()]
    assert ["total", "2"] in lines  # runs
    assert ["outcome", "ok", "1"] in lines and ["outcome", "error", "1"] in lines
    assert ["tool", "fs.list_directory", "2"] in lines
    assert ["created", "1"] in lines  # sessions


def test_stats_json_has_the_same_rows(server: HttpServer) -> None:
    out = stats(server, "--json")
    assert out.returncode == 0, out.stderr
    rows = {(r["section"], r["name"]): r["value"] for r in json.loads(out.stdout)["rows"]}
    assert rows[("runs", "total")] == 2
    assert rows[("tool calls", "tool fs.list_directory")] == 2
    assert rows[("runs", "duration p50")].startswith("<= ")


def test_stats_with_a_wrong_token_says_which_token_to_pass(server: HttpServer) -> None:
    out = stats(server, token="wrong")
    assert out.returncode != 0
    assert "refused the token (401)" in out.stderr and "CODEMODE_TOKEN" in out.stderr


def test_stats_without_a_server_says_how_to_start_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CODEMODE_URL"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "codemode",
            "stats",
            "--url",
            "http://127.0.0.1:9",
            "--timeout",
            "5",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert "codemode serve --transport http" in out.stderr
