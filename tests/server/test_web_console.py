"""The web console of a real ``codemode serve --transport http``, in headless Chromium:
sign in with the token, watch a run appear while it runs, open its timeline."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from playwright.sync_api import Page, expect

from .browser import ARTIFACTS
from .conftest import TOKEN, HttpServer, http_client, make_workspace, start_http_server

pytestmark = pytest.mark.browser
WAIT_MS = 60_000  # generous: the machine may be loaded


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    base, files = make_workspace(tmp_path_factory.mktemp("console"))
    s = start_http_server(base)
    s.files = files
    try:
        yield s
    finally:
        s.stop()


def root(server: HttpServer) -> str:
    return server.url.removesuffix("/mcp")


def run_in_background(server: HttpServer, code: str) -> tuple[threading.Thread, list[Any]]:
    """``run_code`` from the official MCP client, on a thread of its own."""
    got: list[Any] = []

    async def go() -> None:
        async with http_client(server.url) as client:
            got.append(await client.call_tool("run_code", {"code": code}))

    thread = threading.Thread(target=anyio.run, args=(go,), daemon=True)
    thread.start()
    return thread, got


def sign_in(page: Page, server: HttpServer, token: str = TOKEN) -> None:
    page.goto(root(server) + "/ui")
    expect(page.locator("#login")).to_be_visible(timeout=WAIT_MS)
    page.fill("#token", token)
    page.click("#signin")


def test_a_wrong_token_is_refused_and_the_form_says_so(browser: Any, server: HttpServer) -> None:
    page = browser.new_page()
    sign_in(page, server, token="not-the-token")
    expect(page.locator("#login-error")).to_contain_text("refused this token", timeout=WAIT_MS)
    expect(page.locator("#console")).to_be_hidden()
    page.close()


def test_a_run_appears_while_it_runs_and_its_timeline_shows_its_tool_calls(
    browser: Any, server: HttpServer
) -> None:
    assert server.files is not None
    code = (
        f"names = tools.fs.list_directory(path={str(server.files)!r})\n"
        "print('listed')\n"
        "import time\n"
        "time.sleep(3)\n"
        f"text = tools.fs.read_text_file(path={str(server.files / 'todo.md')!r})\n"
        "print('read', len(str(text)))\n"
    )
    page = browser.new_page()
    sign_in(page, server)
    expect(page.locator("#console")).to_be_visible(timeout=WAIT_MS)
    thread, got = run_in_background(server, code)
    running = page.locator("#runs tbody tr", has_text="running")
    expect(running.first).to_be_visible(timeout=WAIT_MS)
    expect(page.locator("#calls tbody")).to_contain_text("run_code", timeout=WAIT_MS)
    expect(page.locator("#sessions tbody tr").first).not_to_have_class("empty")
    thread.join(timeout=120)
    assert got and not got[0].is_error, got
    done = page.locator("#runs tbody tr", has_text="list_directory").filter(has_text="ok")
    expect(done.first).to_be_visible(timeout=WAIT_MS)
    done.first.click()
    expect(page.locator("#run")).to_be_visible()
    steps = page.locator("#timeline .step")
    expect(steps).to_have_count(2)
    expect(steps.nth(0)).to_contain_text("fs.list_directory")
    expect(steps.nth(1)).to_contain_text("fs.read_text_file")
    expect(page.locator("#run-output")).to_contain_text("listed")
    expect(page.locator("#run-code")).to_contain_text("time.sleep(3)")
    expect(page.locator("#metrics")).to_contain_text("fs.list_directory", timeout=WAIT_MS)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "console-run-timeline.png"), full_page=True)
    page.close()


def test_code_and_output_of_runs_are_shown_as_text_never_as_html(
    browser: Any, server: HttpServer
) -> None:
    hostile = "<img src=x onerror=\"document.title='pwned'\">"
    thread, got = run_in_background(server, f"# {hostile}\nprint({hostile!r})")
    thread.join(timeout=120)
    assert got, "the run did not finish"
    page = browser.new_page()
    sign_in(page, server)
    row = page.locator("#runs tbody tr", has_text="<img src=x")
    expect(row.first).to_be_visible(timeout=WAIT_MS)
    row.first.click()
    expect(page.locator("#run-output")).to_contain_text(hostile)
    assert page.locator("#console img").count() == 0
    assert page.title() != "pwned"
    page.close()


def test_the_console_data_needs_the_servers_token_and_the_page_holds_none(
    server: HttpServer,
) -> None:
    api = root(server) + "/api/console"
    assert httpx2.get(api, timeout=30).status_code == 401
    assert httpx2.get(api, headers={"Authorization": "Bearer wrong"}, timeout=30).status_code == 401
    data = httpx2.get(api, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30).json()
    assert set(data) >= {"sessions", "calls", "runs", "approvals", "metrics"}
    page = httpx2.get(root(server) + "/ui", timeout=30)
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert TOKEN not in page.text and "sessions" not in json.dumps(dict(page.headers))


def test_the_console_shows_session_ids_only_as_short_digests(server: HttpServer) -> None:
    thread, got = run_in_background(server, "'hello'")
    thread.join(timeout=120)
    assert got, "the run did not finish"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    data = httpx2.get(root(server) + "/api/console", headers=headers, timeout=30).json()
    shown = [r["session"] for r in data["runs"]] + [s["id"] for s in data["sessions"]]
    assert shown and all(re.fullmatch(r"[0-9a-f]{10}|", i) for i in shown), shown


def test_without_the_console_there_is_no_ui(tmp_path: Path) -> None:
    base, _ = make_workspace(tmp_path)
    (base / "config.json").write_text(json.dumps({"web": {"console": False}}))
    s = start_http_server(base)
    try:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        for path in ("/ui", "/ui/app.js", "/api/console"):
            url = s.url.removesuffix("/mcp") + path
            assert httpx2.get(url, headers=headers, timeout=30).status_code == 404, path
    finally:
        s.stop()
