"""Bodies the official client never sends, POSTed raw to a real ``codemode serve``: each is
answered at once and clearly, and one session's ids never block another's."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx2
import pytest

from .conftest import TOKEN, HttpServer
from .rawclient import HANDSHAKE, RawClient

HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}


def session(server: HttpServer) -> dict[str, str]:
    with RawClient(server.url, token=TOKEN, era="handshake") as client:
        client.initialize()
    assert client.session_id is not None
    return {**HEADERS, "Mcp-Session-Id": client.session_id, "MCP-Protocol-Version": HANDSHAKE}


def post(server: HttpServer, headers: dict[str, str], body: Any) -> httpx2.Response:
    content = body if isinstance(body, bytes) else json.dumps(body)
    return httpx2.post(server.url, content=content, headers=headers, timeout=60)


def run(id_: Any, code: str) -> dict[str, Any]:
    params = {"name": "run_code", "arguments": {"code": code}}
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}


def invalid(response: httpx2.Response) -> str:
    assert response.status_code == 400, response.text
    data = response.json()
    assert data["id"] is None and data["error"]["code"] == -32600, data
    return str(data["error"]["message"])


def test_a_batch_is_refused_as_a_batch(http_server: HttpServer) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    message = invalid(post(http_server, session(http_server), [ping, {**ping, "id": 2}]))
    assert "batch" in message


@pytest.mark.parametrize("id_", [None, 1.5, {"a": 1}, [1], True])
def test_a_request_with_an_id_mcp_does_not_allow_is_answered(
    http_server: HttpServer, id_: Any
) -> None:
    body = {"jsonrpc": "2.0", "id": id_, "method": "ping"}
    assert "string or an integer" in invalid(post(http_server, session(http_server), body))


def test_an_id_still_in_progress_is_refused_and_the_first_request_gets_its_answer(
    http_server: HttpServer,
) -> None:
    mine, other = session(http_server), session(http_server)
    first: dict[str, httpx2.Response] = {}
    slow = run(5, "import time\ntime.sleep(4)\n'first'")
    thread = threading.Thread(target=lambda: first.setdefault("r", post(http_server, mine, slow)))
    thread.start()
    try:
        http_server.wait_health("calls", 1)
        assert "still in progress" in invalid(post(http_server, mine, run("5", "'second'")))
        # Another session's id 5 is its own.
        assert '"text":"theirs"' in post(http_server, other, run(5, "'theirs'")).text
    finally:
        thread.join(timeout=60)
    assert '"text":"first"' in first["r"].text, first["r"].text
    # Once answered, the id is free again.
    assert '"text":"again"' in post(http_server, mine, run(5, "'again'")).text


def test_a_stream_asked_to_resume_is_opened_fresh(http_server: HttpServer) -> None:
    headers = {**session(http_server), "Accept": "text/event-stream", "Last-Event-ID": "0"}
    with httpx2.stream("GET", http_server.url, headers=headers, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")


@pytest.mark.parametrize("code", ["x = 1\x00", "1+" * 200_000 + "1"])
def test_a_cell_that_cannot_be_parsed_names_no_frame_of_the_workers_python(
    http_server: HttpServer, code: str
) -> None:
    answer = post(http_server, session(http_server), run(9, code)).json()
    error = answer["result"]["structuredContent"]["error"]
    assert error["type"] in ("SyntaxError", "RecursionError"), error
    assert "File " not in error["traceback"] and "ast.py" not in error["traceback"], error


def test_a_progress_token_too_long_to_repeat_is_refused_with_its_id(
    http_server: HttpServer,
) -> None:
    body = run(10, "print(1)")
    body["params"]["_meta"] = {"progressToken": "t" * 3_000_000}
    response = post(http_server, session(http_server), body)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["id"] == 10 and error["error"]["code"] == -32602, error
    assert "3,000,000 characters" in error["error"]["message"]


def test_a_body_read_in_pieces_reaches_the_sdk_whole_and_one_over_its_limit_is_413(
    http_server: HttpServer,
) -> None:
    headers = session(http_server)
    small = json.dumps({"jsonrpc": "2.0", "id": 11, "method": "ping"}).encode()
    pieces = iter([small[:10], small[10:]])
    answer = httpx2.post(http_server.url, content=pieces, headers=headers, timeout=60)
    assert answer.json() == {"jsonrpc": "2.0", "id": 11, "result": {}}
    big = json.dumps(
        {"jsonrpc": "2.0", "id": 12, "method": "ping", "params": {"x": "a" * 6_000_000}}
    )
    chunks = (big[i : i + 65536].encode() for i in range(0, len(big), 65536))
    answer = httpx2.post(http_server.url, content=chunks, headers=headers, timeout=60)
    assert answer.status_code == 413
