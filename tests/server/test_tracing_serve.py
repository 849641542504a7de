"""``codemode serve`` with tracing on: a run_code joins the client's trace (``_meta``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import HttpServer, http_client, make_workspace, start_http_server

pytestmark = pytest.mark.anyio

TRACE_ID, PARENT_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


def spans_in(lines: list[str]) -> list[dict[str, Any]]:
    """The JSON spans the console exporter wrote among the server's stderr lines."""
    text, found, decoder, i = "".join(lines), [], json.JSONDecoder(), 0
    while (i := text.find("{", i)) != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        if isinstance(obj, dict) and "context" in obj and "name" in obj:
            found.append(obj)
        i = end
    return found


def wait_spans(server: HttpServer, names: set[str], timeout: float = 20.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        spans = spans_in(server.lines)
        if names <= {s["name"] for s in spans}:
            return spans
        time.sleep(0.05)
    raise AssertionError(f"spans {names} never appeared: {spans_in(server.lines)}")


async def test_a_run_code_with_a_traceparent_joins_the_clients_trace(tmp_path: Path) -> None:
    base, files = make_workspace(tmp_path)
    (base / "config.json").write_text(json.dumps({"observability": {"tracing": "console"}}))
    server = start_http_server(base)
    try:
        code = f"tools.fs.list_directory(path={str(files)!r})\n'done'"
        async with http_client(server.url) as client:
            await client.call_tool(
                "run_code",
                {"code": code},
                meta={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"},  # type: ignore[typeddict-unknown-key]
            )
        spans = wait_spans(server, {"codemode.run", "execute_tool fs.list_directory"})
    finally:
        server.stop()
    run = next(s for s in spans if s["name"] == "codemode.run")
    call = next(s for s in spans if s["name"] == "execute_tool fs.list_directory")
    assert run["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert run["parent_id"] == f"0x{PARENT_ID}"
    assert call["parent_id"] == run["context"]["span_id"]
    assert str(files) not in json.dumps(spans)  # arguments never reach a span
