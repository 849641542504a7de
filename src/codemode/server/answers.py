"""A POST whose event stream carries only its answer is answered as plain JSON.

Why: the SDK answers every request POST with an event stream (``text/event-stream``),
and the official client stops reading that stream as soon as the answer arrives, before
the stream's end: its HTTP library then cannot hand the connection back to its pool and
closes it, so every call opened a new TCP connection (server and client each pay the
connection's setup, and the client parses the stream). A JSON body is read to its end and
the connection is reused. At 50 sessions the clients' CPU per call fell by a third and
the server's by up to a sixth (issue 13).

What may be sent is unchanged: the MCP spec lets a server answer a request POST with
either content type, and every client must accept both. The choice is made when the
stream's first event is known, with the event stream's headers held back until then:

- the first event is the request's answer (a JSON-RPC response or error, one ``data``
  line, no event id): it goes out alone as ``application/json`` and the rest of the
  stream (its end) is dropped: the SDK sends nothing after a request's answer;
- anything else first (a progress note with live output, an elicitation request, a
  keep-alive ping, a resumable event with an id): the held headers and that event go
  out at once and the stream streams as before, unchanged.

So a call that prints live output or asks for an approval streams as it did, and a
long call with nothing to say sends its headers with the stream's first keep-alive ping
(sse-starlette's, every 15 s), far below the clients' read timeouts (the official
client's is 300 s).

The answer is recognised from the start of its ``data`` line, as the SDK writes a message
(``{"jsonrpc":"2.0","id":...,"result":`` or ``"error":``): exact when it matches, and
anything else keeps streaming, so a change of the SDK's writing costs only the gain.
"""

from __future__ import annotations

import re

from starlette.types import Message, Send

__all__ = ["answer_of", "answer_plainly"]

_ANSWER = re.compile(
    rb'event: message(\r\n|\r|\n)data: (\{"jsonrpc":"2\.0","id":(?:-?\d+|"(?:[^"\\\r\n]|\\.)*"),'
    rb'"(?:result|error)":[^\r\n]*\})\1\1'
)
"""One SSE event, a JSON-RPC answer on one data line, nothing else (no id, no comment)."""

_STREAM_ONLY = frozenset(
    (b"content-type", b"content-length", b"cache-control", b"connection", b"x-accel-buffering")
)
"""Headers of an event stream a JSON answer does not keep (it keeps the session id...)."""


def answer_of(event: bytes) -> bytes | None:
    """The JSON-RPC answer an event-stream chunk is made of, or None if it is anything else."""
    found = _ANSWER.fullmatch(event)
    return found.group(2) if found is not None else None


def _is_event_stream(start: Message) -> bool:
    if start.get("status") != 200:
        return False
    for name, value in start.get("headers", ()):
        if name.lower() == b"content-type":
            return bytes(value).lower().startswith(b"text/event-stream")
    return False


def answer_plainly(send: Send) -> Send:
    """``send`` for one request POST, answering as the module doc says."""
    held: Message | None = None  # an event stream's start, not sent yet
    passing = False  # the answer streams: everything goes through
    answered = False  # answered as JSON: the rest of the stream is dropped

    async def plain_send(message: Message) -> None:
        nonlocal held, passing, answered
        if passing:
            await send(message)
            return
        if answered:
            return
        if message["type"] == "http.response.start":
            if _is_event_stream(message):
                held = message
            else:
                passing = True
                await send(message)
            return
        if held is None:  # not expected: no start came first
            passing = True
            await send(message)
            return
        body = message.get("body", b"")
        answer = answer_of(bytes(body)) if message.get("more_body", False) else None
        if answer is None:
            passing = True
            start, held = held, None
            await send(start)
            await send(message)
            return
        answered = True
        headers = [(k, v) for k, v in held.get("headers", ()) if k.lower() not in _STREAM_ONLY]
        headers += [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(answer)).encode()),
        ]
        held = None
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return plain_send
