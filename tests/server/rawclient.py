"""An MCP client written from the spec with httpx only: independent of the MCP SDK.

It speaks both eras of streamable HTTP: the 2025 handshake (``initialize``, then
``Mcp-Session-Id`` on every request, ``DELETE`` at the end) and the stateless
2026-07-28 protocol (every request carries its protocol version, capabilities and
routing headers; no session id).
"""

from __future__ import annotations

import itertools
import json
from typing import Any, Literal

import httpx2

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


class RawClient:
    def __init__(
        self,
        url: str,
        *,
        token: str | None,
        era: Literal["handshake", "stateless"],
        headers: dict[str, str] | None = None,
    ) -> None:
        self.url = url
        self.era = era
        self.session_id: str | None = None
        self._ids = itertools.count(1)
        base = {"Accept": "application/json, text/event-stream", **(headers or {})}
        if token is not None:
            base["Authorization"] = f"Bearer {token}"
        self.http = httpx2.Client(headers=base, timeout=60)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- wire ----------------------------------------------------------------------

    def request(self, method: str, params: dict[str, Any] | None = None) -> httpx2.Response:
        """POST one JSON-RPC request (or notification when ``method`` starts so)."""
        params = dict(params or {})
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        headers: dict[str, str] = {}
        if self.era == "stateless":
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "rawclient", "version": "1"},
            }
            headers["MCP-Protocol-Version"] = MODERN
            headers["Mcp-Method"] = method
            if method in NAME_BEARING:
                headers["Mcp-Name"] = str(params[NAME_BEARING[method]])
        else:
            if self.session_id is not None:
                headers["Mcp-Session-Id"] = self.session_id
                headers["MCP-Protocol-Version"] = HANDSHAKE
        if not method.startswith("notifications/"):
            body["id"] = next(self._ids)
        body["params"] = params
        return self.http.post(self.url, json=body, headers=headers)

    def rpc(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A request and its JSON-RPC answer (from a JSON body or an event stream)."""
        response = self.request(method, params)
        answer = self._answer(response)
        if method == "initialize":
            self.session_id = response.headers.get("mcp-session-id")
        return answer

    @staticmethod
    def _answer(response: httpx2.Response) -> dict[str, Any]:
        kind = response.headers.get("content-type", "")
        if kind.startswith("text/event-stream"):
            for line in response.text.splitlines():
                if line.startswith("data:") and line[5:].strip():
                    message: dict[str, Any] = json.loads(line[5:])
                    if "id" in message:
                        return message
            raise AssertionError(f"no answer in the event stream: {response.text[:500]}")
        data: dict[str, Any] = response.json()
        return data

    # -- MCP -----------------------------------------------------------------------

    def initialize(self) -> dict[str, Any]:
        init = {
            "protocolVersion": HANDSHAKE,
            "capabilities": {},
            "clientInfo": {"name": "rawclient", "version": "1"},
        }
        answer = self.rpc("initialize", init)
        self.request("notifications/initialized")
        return answer

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        answer = self.rpc("tools/call", {"name": tool, "arguments": arguments})
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    def end(self) -> int:
        """End a handshake-era session (``DELETE``); returns the HTTP status."""
        assert self.session_id is not None
        response = self.http.delete(
            self.url,
            headers={"Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": HANDSHAKE},
        )
        return response.status_code


def text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])
