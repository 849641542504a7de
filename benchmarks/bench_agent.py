"""Agent loop benchmark: overhead per step, and tokens sent per step vs catalog size.

Both loops talk to the same scripted model (``FakeLLMServer``, a real local HTTP server)
through the real ``openai`` SDK, in the same run, over the same generated catalogs
(100 and 1,000 tools: 20 per business domain, from benchmarks/tokens/servers/benchdata.py,
registered as Python tools of a real session):

- code mode (``codemode.agent``): the model gets the system prompt and one ``run_code``
  tool; it finds the tool with ``tools.search`` in code, calls it, answers (3 steps);
- direct tool calling (the baseline): every tool's definition is sent with every request;
  the model calls the tool, reads the result, answers (2 steps).

Overhead per step = task wall time - time inside the model call (SDK + HTTP + the fake
model) - time inside the session's runs (worker round trips, tool calls), divided by the
steps: what the loop itself adds (prompt assembly, conversion, code extraction,
bookkeeping). Tokens are tiktoken o200k_base counts of each request body as sent.

Run: ``.venv/bin/python benchmarks/bench_agent.py [--tasks 30] [--quick]``
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault(
    "TIKTOKEN_CACHE_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "tiktoken")
)

from _stats import median, pct, table
from codemode import Session, SubprocessExecutor
from codemode.agent.loop import Limits, run_task
from codemode.agent.messages import Message, ModelRequest, ToolSpec
from codemode.agent.providers.openai import OpenAIChatModel
from codemode.agent.testing import Answer, Code, FakeLLMServer, ToolCall
from codemode.bench.catalogs import load_benchdata
from codemode.bench.tokens import count_tokens

TASK = "How many units of SKU-1042 are available in warehouse AMS-1?"
_TYPES: dict[str, Any] = {"string": str, "integer": int, "boolean": bool, "array": list[str]}


def catalog(n_tools: int) -> list[tuple[str, dict[str, Any]]]:
    data = load_benchdata()
    small = list(data.CATALOG_SMALL)
    domains = small + [d[0] for d in data.CATALOG_DOMAINS if d[0] not in small]
    out = [(d, spec) for d in domains[: n_tools // 20] for spec in data.catalog_tools(d)]
    assert len(out) == n_tools, f"the catalog has only {len(out)} tools"
    return out


def python_tool(domain: str, spec: dict[str, Any]) -> Any:
    data = load_benchdata()

    def call(**kwargs: Any) -> dict[str, Any]:
        result: dict[str, Any] = data.catalog_result(
            domain, spec["name"], {k: v for k, v in kwargs.items() if v is not None}
        )
        return result

    params = []
    for name, p in spec["params"].items():
        base: Any = Literal[tuple(p["enum"])] if p["enum"] else _TYPES[p["type"]]
        typ = base if p["required"] else base | None
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if p["required"] else None,
                annotation=Annotated[typ, Field(description=p["description"])],
            )
        )
    call.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    call.__name__ = spec["name"]
    call.__doc__ = spec["description"]
    return call


def json_schema(spec: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for name, p in spec["params"].items():
        prop: dict[str, Any] = {"type": p["type"], "description": p["description"]}
        if p["type"] == "array":
            prop["items"] = {"type": "string"}
        if p["enum"]:
            prop["enum"] = p["enum"]
        props[name] = prop
    required = [n for n, p in spec["params"].items() if p["required"]]
    return {"type": "object", "properties": props, "required": required}


class Timed:
    """Wraps a model and a session to add up the time spent inside each."""

    def __init__(self, model: Any, session: Any) -> None:
        self.model_inner, self.session_inner = model, session
        self.model_s = self.run_s = 0.0
        self.provider, self.model, self.supports_tools = model.provider, model.model, True
        self.host = session.host

    async def complete(self, request: ModelRequest) -> Any:
        t0 = time.perf_counter()
        try:
            return await self.model_inner.complete(request)
        finally:
            self.model_s += time.perf_counter() - t0

    async def run(self, code: str, timeout: float | None = None) -> Any:
        t0 = time.perf_counter()
        try:
            return await self.session_inner.run(code, timeout=timeout)
        finally:
            self.run_s += time.perf_counter() - t0

    async def aclose(self) -> None:
        return None


def new_model(llm: FakeLLMServer) -> OpenAIChatModel:
    import openai

    client = openai.AsyncOpenAI(api_key="sk-bench", base_url=llm.openai_url, max_retries=0)
    return OpenAIChatModel(client, openai, model="gpt-4o-mini")


async def code_mode(llm: FakeLLMServer, n_tools: int, tasks: int) -> dict[str, Any]:
    session = Session(SubprocessExecutor())
    for domain, spec in catalog(n_tools):
        session.register_tool(python_tool(domain, spec), server=domain, name=spec["name"])
    await session.start()
    model = new_model(llm)
    overheads: list[float] = []
    try:
        for i in range(tasks + 1):  # the first task warms the worker and the tool index
            llm.reset(
                [
                    Code(
                        "hits = tools.search('stock level of a SKU in a warehouse', "
                        "detail='description', limit=3)\n"
                        "for h in hits:\n    print(h['name'], '-', h['description'])"
                    ),
                    Code(
                        "r = tools.inventory.get_stock_level(sku='SKU-1042', warehouse='AMS-1')"
                        "\nprint(r['available'], 'available')"
                    ),
                    Answer("It has units available."),
                ]
            )
            timed = Timed(model, session)
            t0 = time.perf_counter()
            result = await run_task(timed, timed, TASK, limits=Limits(max_steps=5))
            wall = time.perf_counter() - t0
            assert result.success, result.error
            if i:
                steps = len(result.steps)
                overheads += [(wall - timed.model_s - timed.run_s) / steps * 1000] * steps
            requests = llm.requests
    finally:
        await model.aclose()
        await session.close()
    return {"overhead_ms": overheads, "tokens": [count_tokens(q.text) for q in requests]}


async def direct(llm: FakeLLMServer, n_tools: int, tasks: int) -> dict[str, Any]:
    tools = catalog(n_tools)
    functions = {f"{d}__{s['name']}": python_tool(d, s) for d, s in tools}
    specs = tuple(ToolSpec(f"{d}__{s['name']}", s["description"], json_schema(s)) for d, s in tools)
    model = new_model(llm)
    system = "You help with business systems. Call the tools you need, then answer."
    overheads: list[float] = []
    try:
        for i in range(tasks + 1):
            llm.reset(
                [
                    ToolCall(
                        "inventory__get_stock_level", {"sku": "SKU-1042", "warehouse": "AMS-1"}
                    ),
                    Answer("It has units available."),
                ]
            )
            messages: list[Message] = [Message("user", TASK)]
            model_s = tool_s = 0.0
            steps = 0
            t0 = time.perf_counter()
            while True:
                steps += 1
                request = ModelRequest(system, tuple(messages), specs, max_tokens=2000)
                m0 = time.perf_counter()
                reply = await model.complete(request)
                model_s += time.perf_counter() - m0
                if not reply.tool_calls:
                    break
                messages.append(Message("assistant", reply.text, tuple(reply.tool_calls)))
                for call in reply.tool_calls:
                    c0 = time.perf_counter()
                    out = functions[call.name](**call.arguments)
                    tool_s += time.perf_counter() - c0
                    messages.append(Message("tool", json.dumps(out), tool_call_id=call.id))
            wall = time.perf_counter() - t0
            if i:
                overheads += [(wall - model_s - tool_s) / steps * 1000] * steps
            requests = llm.requests
    finally:
        await model.aclose()
    return {"overhead_ms": overheads, "tokens": [count_tokens(q.text) for q in requests]}


async def main(tasks: int) -> None:
    rows_tokens = []
    rows_overhead = []
    results: dict[tuple[str, int], dict[str, Any]] = {}
    with FakeLLMServer() as llm:
        for n in (100, 1000):
            results[("code mode", n)] = await code_mode(llm, n, tasks)
            results[("direct", n)] = await direct(llm, n, tasks)
    for (loop, n), r in results.items():
        toks = r["tokens"]
        rows_tokens.append([loop, n, len(toks), round(sum(toks) / len(toks)), max(toks), sum(toks)])
        ov = r["overhead_ms"]
        rows_overhead.append([loop, n, len(ov), median(ov), pct(ov, 95)])
    print(
        table(
            f"Tokens sent per step (o200k_base, one task: {TASK!r})",
            ["loop", "tools", "steps", "mean/step", "max/step", "task total"],
            rows_tokens,
        )
    )
    c100 = sum(results[("code mode", 100)]["tokens"]) / len(results[("code mode", 100)]["tokens"])
    c1k = sum(results[("code mode", 1000)]["tokens"]) / len(results[("code mode", 1000)]["tokens"])
    d1k = sum(results[("direct", 1000)]["tokens"]) / len(results[("direct", 1000)]["tokens"])
    print(
        f"code mode per step, 1,000 vs 100 tools: {c1k / c100 - 1:+.1%} (goal: within ±5%); "
        f"direct/code mode per step at 1,000 tools: {d1k / c1k:.1f}x"
    )
    print(
        table(
            f"Loop overhead per step, excluding model and code time (ms, {tasks} tasks each)",
            ["loop", "tools", "steps", "median", "p95"],
            rows_overhead,
        )
    )
    print("goal: code-mode overhead <= 2 ms per step")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=30, help="tasks per configuration")
    parser.add_argument("--quick", action="store_true", help="3 tasks per configuration (CI)")
    ns = parser.parse_args()
    asyncio.run(main(3 if ns.quick else ns.tasks))
