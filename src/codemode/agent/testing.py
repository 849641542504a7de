"""A scripted LLM on a real local HTTP server, for tests and benchmarks (no network, no key).

``FakeLLMServer`` speaks the wire formats the official SDKs send and parse: OpenAI chat
completions (``/v1/chat/completions``, with tool calls), Azure OpenAI's deployment URLs
(``/openai/deployments/<name>/chat/completions?api-version=...``) and Anthropic messages
(``/v1/messages``). It plays a script of replies in order and records every request::

    with FakeLLMServer([Code("print(6 * 7)"), Answer("42")], api_key="sk-test") as llm:
        agent = create_agent(llm_provider="openai", llm_base_url=llm.openai_url,
                             llm_api_key="sk-test", executor="subprocess")
        assert agent.execute_task("what is 6*7?").result == "42"
        assert "run_code" in llm.requests[0].text

``Code`` becomes a ``run_code`` tool call when the request offers that tool, and a fenced
```python block otherwise. ``Status`` answers with an HTTP error (429 with a short
``retry-after-ms``, 500, ...). A callable step gets the ``RecordedRequest`` and returns
a step. Usage figures are approximate (characters / 4), good enough for budgets.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = [
    "Answer",
    "Code",
    "FakeLLMServer",
    "Raw",
    "RecordedRequest",
    "Status",
    "Text",
    "ToolCall",
]

Wire = Literal["openai", "azure", "anthropic"]


@dataclass(frozen=True)
class Code:
    """Run this code: a ``run_code`` tool call, or a ```python block in fenced mode."""

    code: str
    text: str = ""


@dataclass(frozen=True)
class Answer:
    """The final answer (plain text, no tool call)."""

    text: str


@dataclass(frozen=True)
class Text:
    """Exactly this assistant text (e.g. a reply with several python blocks)."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """A call of any tool by name (for direct tool-calling loops and bad calls)."""

    name: str
    arguments: dict[str, Any] | str


@dataclass(frozen=True)
class Status:
    """An HTTP error; ``retry_after_ms`` sets the header the SDKs honour before retrying."""

    status: int
    message: str = "fake error"
    retry_after_ms: int | None = None
    code: str | None = None
    param: str | None = None


@dataclass(frozen=True)
class Raw:
    """Exactly this body with HTTP 200 (``application/json``, whatever it holds): a
    compatible server, a proxy or a web page at the base URL answering what no SDK checks
    (negative token counts, a number as content, HTML)."""

    body: str


Step = Code | Answer | Text | ToolCall | Status | Raw
Script = Iterable[Step | Callable[["RecordedRequest"], Step]]


@dataclass
class RecordedRequest:
    """One request the fake server received."""

    wire: Wire
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: dict[str, Any]
    deployment: str | None = None
    received: float = 0.0
    handled_ms: float = 0.0

    @property
    def text(self) -> str:
        """The JSON body as sent (for 'contains' checks and token counts)."""
        return json.dumps(self.body, ensure_ascii=False)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.body.get("tools") or [])

    @property
    def tool_names(self) -> list[str]:
        out = []
        for t in self.tools:
            fn = t.get("function")
            out.append(str((fn if isinstance(fn, dict) else t).get("name")))
        return out

    @property
    def system(self) -> str:
        if self.wire == "anthropic":
            system = self.body.get("system", "")
            return system if isinstance(system, str) else json.dumps(system)
        return "\n".join(str(m.get("content")) for m in self.messages if m.get("role") == "system")

    def last_tool_output(self) -> str:
        """The text of the most recent tool result (or fenced-mode output message)."""
        for m in reversed(self.messages):
            if m.get("role") == "tool":
                return str(m.get("content", ""))
            content = m.get("content")
            if isinstance(content, list):
                for block in reversed(content):
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        inner = block.get("content")
                        return inner if isinstance(inner, str) else json.dumps(inner)
                if m.get("role") == "user":
                    return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
            if m.get("role") == "user" and isinstance(content, str):
                return content
        return ""


@dataclass
class _State:
    script: list[Any]
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class FakeLLMServer:
    """The scripted model on ``127.0.0.1:<free port>``, served by uvicorn in a thread."""

    def __init__(
        self,
        script: Script = (),
        *,
        api_key: str | None = None,
        reject_max_tokens: bool = False,
        delay: float = 0.0,
        model: str = "fake-model",
    ) -> None:
        self._state = _State(list(script))
        self.api_key = api_key
        self.reject_max_tokens = reject_max_tokens
        self.delay = delay
        self.model = model
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self.port = 0

    # -- script and records ------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    def add(self, *steps: Step | Callable[[RecordedRequest], Step]) -> None:
        with self._state.lock:
            self._state.script.extend(steps)

    def reset(self, script: Script = ()) -> None:
        with self._state.lock:
            self._state.script = list(script)
            self._state.requests.clear()

    @property
    def remaining(self) -> int:
        with self._state.lock:
            return len(self._state.script)

    # -- addresses -----------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        """``base_url`` for the OpenAI SDK (and ``OPENAI_BASE_URL``)."""
        return f"{self.url}/v1"

    @property
    def azure_endpoint(self) -> str:
        return self.url

    @property
    def anthropic_url(self) -> str:
        return self.url

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> FakeLLMServer:
        import uvicorn

        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/chat/completions", self._openai, methods=["POST"]),
                Route(
                    "/openai/deployments/{deployment}/chat/completions",
                    self._azure,
                    methods=["POST"],
                ),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
            ]
        )
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="error", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True, name="fake-llm"
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake LLM server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._server = self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- handlers ------------------------------------------------------------------------
    async def _record(self, request: Request, wire: Wire) -> tuple[RecordedRequest, Any]:
        try:
            body = await request.json()
        except ValueError:
            body = {}
        rec = RecordedRequest(
            wire=wire,
            path=request.url.path,
            query=dict(request.query_params),
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body if isinstance(body, dict) else {},
            deployment=request.path_params.get("deployment"),
            received=time.perf_counter(),
        )
        step: Any = None
        with self._state.lock:
            self._state.requests.append(rec)
            if self._authorized(rec) and not self._refused_param(rec):
                step = self._state.script.pop(0) if self._state.script else None
        if callable(step):
            step = step(rec)
        if self.delay:
            import anyio

            await anyio.sleep(self.delay)
        return rec, step

    def _authorized(self, rec: RecordedRequest) -> bool:
        if self.api_key is None:
            return True
        if rec.wire == "anthropic" and "x-api-key" in rec.headers:
            return rec.headers["x-api-key"] == self.api_key
        if rec.wire == "azure":
            return rec.headers.get("api-key") == self.api_key
        return rec.headers.get("authorization") == f"Bearer {self.api_key}"

    def _refused_param(self, rec: RecordedRequest) -> bool:
        return self.reject_max_tokens and rec.wire == "azure" and "max_tokens" in rec.body

    def _gate(self, rec: RecordedRequest, step: Any) -> Any:
        """Auth and parameter refusals first, then the scripted step."""
        if not self._authorized(rec):
            return Status(401, "Incorrect API key provided.", code="invalid_api_key")
        if self._refused_param(rec):
            return Status(
                400,
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                code="unsupported_parameter",
                param="max_tokens",
            )
        if step is None:
            return Status(500, "the fake LLM's script is exhausted", code="script_exhausted")
        return step

    async def _openai(self, request: Request) -> Response:
        return await self._chat(request, "openai")

    async def _azure(self, request: Request) -> Response:
        return await self._chat(request, "azure")

    async def _chat(self, request: Request, wire: Wire) -> Response:
        rec, step = await self._record(request, wire)
        step = self._gate(rec, step)
        try:
            if isinstance(step, Status):
                return _error(step, "openai")
            if isinstance(step, Raw):
                return _raw(step)
            offers_run_code = "run_code" in rec.tool_names
            content: str | None = None
            calls: list[dict[str, Any]] = []
            if isinstance(step, Code) and offers_run_code:
                content = step.text or None
                calls.append(_openai_call(len(rec.messages), "run_code", {"code": step.code}))
            elif isinstance(step, Code):
                content = f"{step.text}\n```python\n{step.code}\n```".lstrip()
            elif isinstance(step, ToolCall):
                calls.append(_openai_call(len(rec.messages), step.name, step.arguments))
            else:
                content = step.text
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                message["tool_calls"] = calls
            usage_in, usage_out = _usage(rec.text, json.dumps(message))
            return JSONResponse(
                {
                    "id": f"chatcmpl-{len(self.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": rec.body.get("model") or self.model,
                    "choices": [
                        {
                            "index": 0,
                            "message": message,
                            "finish_reason": "tool_calls" if calls else "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": usage_in,
                        "completion_tokens": usage_out,
                        "total_tokens": usage_in + usage_out,
                    },
                }
            )
        finally:
            rec.handled_ms = (time.perf_counter() - rec.received) * 1000

    async def _anthropic(self, request: Request) -> Response:
        rec, step = await self._record(request, "anthropic")
        step = self._gate(rec, step)
        try:
            if isinstance(step, Status):
                return _error(step, "anthropic")
            if isinstance(step, Raw):
                return _raw(step)
            offers_run_code = "run_code" in rec.tool_names
            blocks: list[dict[str, Any]] = []
            n = len(rec.messages)
            if isinstance(step, Code) and offers_run_code:
                if step.text:
                    blocks.append({"type": "text", "text": step.text})
                blocks.append(_anthropic_call(n, "run_code", {"code": step.code}))
            elif isinstance(step, Code):
                text = f"{step.text}\n```python\n{step.code}\n```".lstrip()
                blocks.append({"type": "text", "text": text})
            elif isinstance(step, ToolCall):
                args = step.arguments if isinstance(step.arguments, dict) else {}
                blocks.append(_anthropic_call(n, step.name, args))
            else:
                blocks.append({"type": "text", "text": step.text})
            used_tool = any(b["type"] == "tool_use" for b in blocks)
            usage_in, usage_out = _usage(rec.text, json.dumps(blocks))
            return JSONResponse(
                {
                    "id": f"msg_{len(self.requests)}",
                    "type": "message",
                    "role": "assistant",
                    "model": rec.body.get("model") or self.model,
                    "content": blocks,
                    "stop_reason": "tool_use" if used_tool else "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": usage_in, "output_tokens": usage_out},
                }
            )
        finally:
            rec.handled_ms = (time.perf_counter() - rec.received) * 1000


def _raw(step: Raw) -> Response:
    return Response(step.body, media_type="application/json")


def _usage(sent: str, reply: str) -> tuple[int, int]:
    return max(1, len(sent) // 4), max(1, len(reply) // 4)


def _openai_call(n: int, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": raw}}


def _anthropic_call(n: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": arguments}


_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _error(step: Status, wire: str) -> JSONResponse:
    headers: dict[str, str] = {}
    if step.retry_after_ms is not None:
        headers["retry-after-ms"] = str(step.retry_after_ms)
    if step.code == "script_exhausted":
        headers["x-should-retry"] = "false"
    if wire == "anthropic":
        kind = _ANTHROPIC_TYPES.get(step.status, "api_error")
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": step.message}}
    else:
        body = {
            "error": {
                "message": step.message,
                "type": "invalid_request_error" if step.status < 500 else "server_error",
                "param": step.param,
                "code": step.code,
            }
        }
    return JSONResponse(body, status_code=step.status, headers=headers)
