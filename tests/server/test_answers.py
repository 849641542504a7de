"""A call with nothing to stream is answered as JSON, and its client reuses the connection;
a call that streams (live output) still gets an event stream (``server/answers.py``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sse_starlette import ServerSentEvent

from codemode.server.answers import answer_of

from .conftest import TOKEN, HttpServer, make_workspace, start_http_server
from .rawclient import RawClient
from .test_stdio import text_of

pytestmark = pytest.mark.anyio

Seen = list[tuple[str, str, Any]]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    base, _ = make_workspace(tmp_path_factory.mktemp("answers"))
    s = start_http_server(base)
    try:
        yield s
    finally:
        s.stop()


@asynccontextmanager
async def watched_client(url: str, seen: Seen, **options: Any) -> AsyncIterator[Client]:
    """The official client (``options``: its own, an elicitation callback...); ``seen``
    gets each POST answer's (JSON-RPC method, content type, the client's end of the
    connection it came on)."""

    async def note(response: httpx2.Response) -> None:
        if response.request.method == "POST":
            method = json.loads(response.request.content).get("method", "")
            stream = response.extensions["network_stream"]
            seen.append(
                (method, response.headers["content-type"], stream.get_extra_info("client_addr"))
            )

    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=httpx2.Timeout(30, read=60),
            event_hooks={"response": [note]},
        ) as http,
        Client(streamable_http_client(url, http_client=http), **options) as client,
    ):
        yield client


async def test_calls_that_stream_nothing_are_answered_as_json_on_one_connection(
    server: HttpServer,
) -> None:
    seen: Seen = []
    async with watched_client(server.url, seen) as client:
        for i in range(3):
            result = await client.call_tool("run_code", {"code": f"x = {i}\nx * 10"})
            assert str(i * 10) in text_of(result)
    calls = [(kind, peer) for method, kind, peer in seen if method == "tools/call"]
    assert [kind for kind, _ in calls] == ["application/json"] * 3
    assert len({peer for _, peer in calls}) == 1  # the connection was reused


async def test_a_call_with_live_output_still_streams_its_progress_before_its_answer(
    server: HttpServer,
) -> None:
    seen: Seen = []
    notes: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append(message or "")

    async with watched_client(server.url, seen) as client:
        code = "import time\nprint('one', flush=True)\ntime.sleep(0.5)\n'done'"
        result = await client.call_tool("run_code", {"code": code}, progress_callback=on_progress)
    assert "done" in text_of(result)
    assert "".join(notes) == "one\n"
    assert [kind for method, kind, _ in seen if method == "tools/call"] == ["text/event-stream"]


async def test_an_approval_question_goes_out_on_the_calls_stream_before_its_answer(
    notes_ws: Any,
) -> None:
    """The question (an elicitation request on the handshake protocol) is the stream's
    first event, so the call streams; the answer that follows the approval arrives."""
    notes_ws.configure({"policy": {"destructive": "ask"}})
    asked: list[str] = []

    async def approve(context: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        asked.append(params.message)
        return mt.ElicitResult(action="accept", content={"confirm": True})

    s = start_http_server(notes_ws.base)
    seen: Seen = []
    try:
        async with watched_client(s.url, seen, elicitation_callback=approve) as client:
            code = "print(tools.notes.delete_note(name='hello'))"
            result = await client.call_tool("run_code", {"code": code})
            assert "deleted" in text_of(result)
            again = await client.call_tool("run_code", {"code": "6 * 7"})
            assert "42" in text_of(again)
    finally:
        s.stop()
    assert len(asked) == 1 and 'notes.delete_note(name="hello")' in asked[0]
    assert notes_ws.calls() == ["delete_note"]
    kinds = [kind for method, kind, _ in seen if method == "tools/call"]
    assert kinds == ["text/event-stream", "application/json"]


def test_a_client_of_its_own_gets_the_session_id_and_answers_as_json(server: HttpServer) -> None:
    with RawClient(server.url, token=TOKEN, era="handshake") as raw:
        answer = raw.initialize()
        assert answer["result"]["serverInfo"]["name"]
        assert raw.session_id
        response = raw.request("tools/call", {"name": "run_code", "arguments": {"code": "6*7"}})
        assert response.headers["content-type"] == "application/json"
        assert int(response.headers["content-length"]) == len(response.content)
        assert "42" in response.json()["result"]["content"][0]["text"]
        assert raw.end() == 200


def event(data: str, id: str | None = None) -> bytes:
    """An event as the SDK's streams write it (through sse-starlette)."""
    return ServerSentEvent(data, event="message", id=id, sep="\r\n").encode()


def test_only_a_lone_answer_event_is_taken_as_an_answer() -> None:
    answer = '{"jsonrpc":"2.0","id":7,"result":{"text":"a\\nb \\"c\\""}}'
    error = '{"jsonrpc":"2.0","id":"r-1","error":{"code":-32000,"message":"no"}}'
    assert answer_of(event(answer)) == answer.encode()
    assert answer_of(event(error)) == error.encode()
    assert answer_of(event(answer, id="5")) is None  # resumable: stays a stream
    note = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}'
    assert answer_of(event(note)) is None
    ask = '{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{}}'
    assert answer_of(event(ask)) is None
    assert answer_of(event(answer) + event(answer)) is None
    assert answer_of(b": ping - 2026-11-28\r\n\r\n") is None
    assert answer_of(event('{"jsonrpc":"2.0","id":1,"result":{}}\nmore')) is None
