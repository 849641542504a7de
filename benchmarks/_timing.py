"""Where a call's time goes: the servers' side of ``bench_load.py``'s breakdown.

Both servers of the benchmark (codemode and the bare SDK server) run with
:class:`RequestLog` outermost in their ASGI stack when ``BENCH_REQUEST_LOG`` names a
file: one JSON line per ``POST /mcp`` with its JSON-RPC method, MCP session id, the
client's port (which connection carried it), and three instants: the request reached
the app (after uvicorn read and parsed it), the answer's last data was handed to
uvicorn, and the response ended. Instants are
``time.monotonic()`` (CLOCK_MONOTONIC, one clock for every process of the machine), so
the client processes' own instants line up with them.

The same middleware on both servers: whatever it costs, both pay it. Nothing of it is in
codemode: ``serve_codemode`` adds it to the app ``codemode serve`` builds.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, TextIO

LOG_ENV = "BENCH_REQUEST_LOG"

Scope = dict[str, Any]
Message = dict[str, Any]


class RequestLog:
    """ASGI middleware: one line per ``POST`` on ``path`` (see module doc)."""

    def __init__(self, app: Any, out: TextIO, path: str = "/mcp") -> None:
        self.app = app
        self.out = out
        self.path = path

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        t_in = time.monotonic()
        body: list[bytes] = []
        sid = next((v.decode() for k, v in scope["headers"] if k == b"mcp-session-id"), None)
        peer = scope.get("client")
        marks: dict[str, Any] = {"sid": sid, "in": t_in, "data": None, "peer": peer and peer[1]}

        async def peek(message: Message | None = None) -> Message:
            msg: Message = await receive()
            if msg["type"] == "http.request":
                body.append(msg.get("body", b""))
            return msg

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                marks["status"] = message["status"]
                if marks["sid"] is None:
                    headers = message.get("headers", [])
                    marks["sid"] = next(
                        (v.decode() for k, v in headers if k.lower() == b"mcp-session-id"),
                        None,
                    )
            elif message["type"] == "http.response.body" and message.get("body"):
                marks["data"] = time.monotonic()
            await send(message)

        try:
            await self.app(scope, peek, watch)
        finally:
            marks["end"] = time.monotonic()
            try:
                rpc = json.loads(b"".join(body))
            except ValueError:
                rpc = {}
            if isinstance(rpc, dict):
                marks["method"] = rpc.get("method")
                params = rpc.get("params")
                if isinstance(params, dict) and isinstance(params.get("name"), str):
                    marks["tool"] = params["name"]
            self.out.write(json.dumps(marks) + "\n")


def open_log() -> TextIO | None:
    """The file ``BENCH_REQUEST_LOG`` names, opened to append line by line (or None)."""
    path = os.environ.get(LOG_ENV)
    return open(path, "a", buffering=1) if path else None


def serve_codemode(argv: list[str]) -> None:
    """``codemode serve ARGV`` with :class:`RequestLog` outermost in its HTTP app."""
    import codemode.server.http as http

    out = open_log()
    build = http.build_http_app

    def build_logged(*args: Any, **kwargs: Any) -> Any:
        app = build(*args, **kwargs)
        if out is not None:
            app.add_middleware(RequestLog, out=out)
        return app

    http.build_http_app = build_logged
    from codemode.cli import main

    main(["serve", *argv])


def read_log(path: str) -> list[dict[str, Any]]:
    """The lines :class:`RequestLog` wrote (a torn last line is skipped)."""
    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    except FileNotFoundError:
        pass
    return out


def first_calls(records: list[dict[str, Any]], tool: str) -> dict[str, dict[str, Any]]:
    """Per MCP session id: its first ``tools/call`` of ``tool`` (by arrival)."""
    found: dict[str, dict[str, Any]] = {}
    for r in sorted(records, key=lambda r: r["in"]):
        if r.get("method") == "tools/call" and r.get("tool") == tool and r["sid"]:
            found.setdefault(r["sid"], r)
    return found
