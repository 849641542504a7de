"""An ask step's schema comes from whoever wrote the workflow (a client of ``serve``):
checking an answer against it never makes the host fetch a URL or run its regexes."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode import SubprocessExecutor
from codemode.workflows import arun_workflow, scripted_asker


@pytest.fixture
def listener() -> Iterator[tuple[str, list[str]]]:
    """A URL on loopback that answers a schema naming a secret, and the paths requested."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"enum": ["internal-secret"]}')

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/internal", hits
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.anyio
async def test_a_remote_ref_in_an_ask_schema_is_never_fetched(
    tmp_path: Path, listener: tuple[str, list[str]]
) -> None:
    url, hits = listener
    wf = {"steps": [{"ask": "n?", "schema": {"type": "object", "properties": {
        "n": {"$ref": url}}}}]}  # fmt: skip
    asker = scripted_asker([{"n": "x"}, {"n": "y"}])
    result = await arun_workflow(wf, base=tmp_path, executor=SubprocessExecutor(), asker=asker)
    assert hits == []
    assert not any("internal-secret" in m for m in asker.asked)  # type: ignore[attr-defined]
    assert result.result == {"n": "x"}


@pytest.mark.anyio
@pytest.mark.timeout(120, method="thread")  # the regex holds the GIL: only a thread can end it
async def test_an_ask_schema_s_pattern_is_not_run_on_the_host(tmp_path: Path) -> None:
    wf = {"steps": [{"ask": "s?", "schema": {"type": "object", "properties": {
        "s": {"type": "string", "pattern": "^(a+)+$"}}}}]}  # fmt: skip
    answer = {"s": "a" * 40 + "!"}  # hours of backtracking for Python's re
    result = await arun_workflow(
        wf, base=tmp_path, executor=SubprocessExecutor(), asker=scripted_asker([answer])
    )
    assert result.result == answer
