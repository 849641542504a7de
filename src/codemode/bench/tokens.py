"""Token and round-trip benchmark engine: code mode against direct tool calling.

For each scenario two transcripts are built by really calling MCP servers, with the agent's
side scripted (no LLM), then counted with tiktoken's ``o200k_base``:

- **direct**: what a tool-calling agent's context holds: every connected server's
  instructions, every connected tool's definition as a model API receives it (name,
  description, input schema), each call and each full result, and the final answer. Driven
  with the official SDK client against each upstream server.
- **code mode**: what a client of ``codemode serve`` holds: codemode's instructions and
  its own tool definitions, the discovery calls and their results, the code sent, what it
  printed, and the answer.

A *round trip* is one model invocation (one assistant turn; parallel calls in one turn count
once), counted when the turn is made. Every turn is checked for hindsight
(:mod:`codemode.bench.grounding`): the script may rely only on what the transcript has
shown the model. Counts are exact for OpenAI's o200k models and an estimate for every other
model. The scenarios themselves live in :mod:`codemode.bench.scenarios`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, TextContent

from codemode.bench.grounding import Fact, call_facts, code_facts, unseen
from codemode.errors import CodemodeError

ENCODING = "o200k_base"
TOKENIZER_NOTE = (
    f"tokens counted with tiktoken {ENCODING} (exact for OpenAI GPT-4o/o-series; "
    "an estimate for other models)"
)
REPO_ROOT = Path(__file__).resolve().parents[3]
CALL_TIMEOUT = 120.0
PROFILES = ("all", "core", "minimal")
"""``codemode serve --tools`` profiles the benchmark measures."""
CONNECT_TIMEOUT = 180.0


class BenchError(CodemodeError):
    """The benchmark could not run as scripted (a server failed, discovery missed a tool)."""


# ---------------------------------------------------------------- tokenizer


TOKENIZER_URL = f"https://openaipublic.blob.core.windows.net/encodings/{ENCODING}.tiktoken"


def tokenizer_cache_name() -> str:
    """The file name tiktoken gives the cached tokenizer (the sha1 of its URL)."""
    return hashlib.sha1(TOKENIZER_URL.encode()).hexdigest()


@cache
def _encoding() -> Any:
    """o200k_base, from the shared offline cache when the repo sits next to one."""
    shared = REPO_ROOT.parent / "shared" / "tiktoken"
    if "TIKTOKEN_CACHE_DIR" not in os.environ and shared.is_dir():
        os.environ["TIKTOKEN_CACHE_DIR"] = str(shared)
    try:
        import tiktoken
    except ImportError:  # the optional 'bench' extra
        raise BenchError(
            "the token benchmark needs tiktoken: pip install 'codemode[bench]'"
        ) from None
    try:
        return tiktoken.get_encoding(ENCODING)
    except Exception:  # noqa: BLE001 - tiktoken's network/cache failures vary by version
        where = os.environ.get("TIKTOKEN_CACHE_DIR") or "tiktoken's default cache"
        raise BenchError(
            f"the {ENCODING} tokenizer is not in {where} and cannot be downloaded (no "
            f"network?); set TIKTOKEN_CACHE_DIR to a folder holding {tokenizer_cache_name()} "
            "(tiktoken saves it there on one run with internet access)"
        ) from None


def check_tokenizer() -> None:
    """Fail now, in one line, rather than after the scenarios ran."""
    _encoding()


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


# ---------------------------------------------------------------- transcripts


@dataclass(slots=True)
class Entry:
    """One piece of the model's context. ``turn`` is the model invocation that produced it
    (0 for what is there before the first turn: tool definitions and the user's task)."""

    kind: str  # instructions | definitions | task | call | result | answer
    text: str
    turn: int
    tokens: int = 0


@dataclass
class Transcript:
    mode: str
    entries: list[Entry] = field(default_factory=list)
    round_trips: int = 0
    wall_ms: float = 0.0
    definition_tokens: dict[str, int] = field(default_factory=dict)  # per tool

    def add(self, kind: str, text: str) -> None:
        self.entries.append(Entry(kind, text, self.round_trips, count_tokens(text)))

    @property
    def tokens(self) -> int:
        """Size of the final context: everything the model has seen and said."""
        return sum(e.tokens for e in self.entries)

    @property
    def input_tokens_billed(self) -> int:
        """Sum over model invocations of the context each one reads (no prompt caching)."""
        total = 0
        for turn in range(1, self.round_trips + 1):
            total += sum(e.tokens for e in self.entries if e.turn < turn)
        return total

    def breakdown(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.entries:
            out[e.kind] = out.get(e.kind, 0) + e.tokens
        return out

    def text(self) -> str:
        """The transcript as a human reads it, for ``--transcripts``."""
        parts = [f"# {self.mode}: {self.tokens} tokens, {self.round_trips} round trips\n"]
        for e in self.entries:
            parts.append(f"--- turn {e.turn} {e.kind} ({e.tokens} tokens)\n{e.text}\n")
        return "\n".join(parts)


def tool_definition(
    name: str, description: str | None, input_schema: dict[str, Any]
) -> dict[str, Any]:
    """A tool as a model API receives it (Anthropic's shape; OpenAI's differs only in keys)."""
    return {"name": name, "description": description or "", "input_schema": input_schema}


def result_text(result: CallToolResult) -> str:
    """What an MCP client hands the model for a tool result: its text content."""
    texts = []
    for block in result.content:
        if isinstance(block, TextContent):
            texts.append(block.text)
        else:
            texts.append(f"[{block.type} content]")
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(texts)


Caller = Callable[[str, dict[str, Any]], Awaitable[CallToolResult]]


class Agent:
    """The scripted model: it issues turns of tool calls and a final answer, and every byte
    that passes through its context is recorded in the transcript.

    Each turn is checked against what the model has seen so far: the names and argument
    names of the tools it calls must appear in its instructions, definitions, task or
    earlier results, and the facts inside code sent to ``code_tool`` (upstream tools, their
    argument names, result keys, compared values) in its task or earlier results, i.e.
    what discovery showed, never codemode's own fixed text.
    """

    def __init__(
        self,
        mode: str,
        definitions: list[dict[str, Any]],
        task: str,
        caller: Caller,
        *,
        instructions: list[str] | None = None,
        code_tool: str | None = None,
    ):
        self.transcript = Transcript(mode)
        self._caller = caller
        self._code_tool = code_tool
        self._started = 0.0
        text = "\n\n".join(i for i in instructions or [] if i.strip())
        if text:
            self.transcript.add("instructions", text)
        self.transcript.add("definitions", json.dumps(definitions, ensure_ascii=False))
        self.transcript.definition_tokens = {
            d["name"]: count_tokens(json.dumps(d, ensure_ascii=False)) for d in definitions
        }
        self.transcript.add("task", task)

    def _seen(self, *kinds: str) -> str:
        return "\n".join(e.text for e in self.transcript.entries if e.kind in kinds)

    def _check(self, facts: list[Fact], seen: str, what: str) -> None:
        missing = unseen(facts, seen)
        if missing:
            raise BenchError(
                f"{self.transcript.mode}, turn {self.transcript.round_trips + 1}: hindsight: "
                f"{what} relies on {', '.join(map(str, missing))}, which nothing shown to the "
                "model so far contains"
            )

    async def turn(self, *calls: tuple[str, dict[str, Any]]) -> list[str]:
        """One model invocation emitting ``calls`` (in parallel); returns the result texts."""
        everything = self._seen("instructions", "definitions", "task", "result")
        for name, args in calls:
            self._check(call_facts(name, args), everything, f"the call to {name}")
            if name == self._code_tool:
                discovered = self._seen("task", "result")
                self._check(code_facts(str(args.get("code", ""))), discovered, "the code")
        if not self._started:
            self._started = time.perf_counter()
        self.transcript.round_trips += 1
        for name, args in calls:
            self.transcript.add(
                "call", json.dumps({"name": name, "input": args}, ensure_ascii=False)
            )
        results = [await self._caller(name, args) for name, args in calls]
        texts = []
        for (name, _), res in zip(calls, results, strict=True):
            text = result_text(res)
            if res.is_error:
                raise BenchError(f"{self.transcript.mode}: {name} failed: {text[:2000]}")
            self.transcript.add("result", text)
            texts.append(text)
        return texts

    def answer(self, text: str) -> Transcript:
        self.transcript.round_trips += 1
        self.transcript.add("answer", text)
        self.transcript.wall_ms = (time.perf_counter() - self._started) * 1000
        return self.transcript


# ---------------------------------------------------------------- connections


def _params(spec: dict[str, Any]) -> StdioServerParameters:
    env = {**os.environ, **spec.get("env", {})}
    return StdioServerParameters(
        command=spec["command"], args=spec.get("args", []), env=env, cwd=spec.get("cwd")
    )


async def _list_all_tools(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools


def single_error(exc: BaseException) -> BaseException:
    """The one real error inside (nested) exception groups of anyio task groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _stderr_tail(path: Path, chars: int = 1500) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return f" (stderr: ...{text[-chars:]})" if text.strip() else ""


@asynccontextmanager
async def connect_all(catalog: dict[str, dict[str, Any]], logs: Path) -> Any:
    """Connect to every server of ``catalog`` concurrently; yields ``{name: (client, tools)}``.

    Each connection is entered and left in its own task (anyio scopes must be), and all are
    closed when the block ends. Servers' stderr goes to ``logs/<name>.stderr``.
    """
    logs.mkdir(parents=True, exist_ok=True)
    connected: dict[str, tuple[Client, list[Any]]] = {}
    errors: dict[str, BaseException] = {}
    stop = anyio.Event()
    done = {"n": 0}
    all_ready = anyio.Event()

    async def hold(name: str, spec: dict[str, Any]) -> None:
        log = logs / f"{name}.stderr"
        try:
            with log.open("w") as errlog:
                transport = stdio_client(_params(spec), errlog=errlog)
                async with Client(transport, read_timeout_seconds=CALL_TIMEOUT) as client:
                    connected[name] = (client, await _list_all_tools(client))
                    _mark()
                    await stop.wait()
        except Exception as exc:  # noqa: BLE001 - reported with the server name below
            errors[name] = BenchError(f"{single_error(exc)!r}{_stderr_tail(log)}")
            _mark()

    def _mark() -> None:
        done["n"] += 1
        if done["n"] == len(catalog):
            all_ready.set()

    try:
        async with anyio.create_task_group() as tg:
            for name, spec in catalog.items():
                tg.start_soon(hold, name, spec)
            try:
                with anyio.fail_after(CONNECT_TIMEOUT):
                    await all_ready.wait()
                if errors:
                    raise BenchError(
                        "could not connect: "
                        + "; ".join(f"{n}: {e}" for n, e in sorted(errors.items()))
                    )
                yield {name: connected[name] for name in catalog}
            finally:
                stop.set()
    except BaseExceptionGroup as group:
        raise single_error(group) from None


def direct_definitions(connected: dict[str, tuple[Client, list[Any]]]) -> list[dict[str, Any]]:
    """Every tool of every server, named ``server__tool`` as multi-server clients do."""
    return [
        tool_definition(f"{server}__{t.name}", t.description, t.input_schema)
        for server, (_, tools) in connected.items()
        for t in tools
    ]


def direct_instructions(connected: dict[str, tuple[Client, list[Any]]]) -> list[str]:
    """Each server's ``instructions``, which MCP clients put in the model's system prompt."""
    return [client.instructions or "" for client, _ in connected.values()]


def direct_caller(connected: dict[str, tuple[Client, list[Any]]]) -> Caller:
    async def call(name: str, args: dict[str, Any]) -> CallToolResult:
        server, _, tool = name.partition("__")
        return await connected[server][0].call_tool(tool, args)

    return call


def serve_command(
    base: Path, executor: str = "sandbox", tools: str = "all"
) -> StdioServerParameters:
    """``codemode serve`` over stdio, started with this interpreter."""
    args = [
        "-c",
        "from codemode.cli import main; main()",
        "serve",
        "--base",
        str(base),
        "--transport",
        "stdio",
        "--executor",
        executor,
        "--tools",
        tools,
    ]
    return StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ))


@asynccontextmanager
async def codemode_client(
    catalog: dict[str, dict[str, Any]],
    base: Path,
    executor: str = "sandbox",
    tools: str = "all",
    *,
    privacy: bool = False,
) -> Any:
    """A client of ``codemode serve`` whose workspace connects ``catalog``; yields
    ``(client, definitions)``. Upstream servers are warmed up before the block (a search
    outside any transcript) so wall times compare work, not process start-up. ``privacy``
    turns the workspace's personal-data tokenization on."""
    base.mkdir(parents=True, exist_ok=True)
    (base / "mcp.json").write_text(json.dumps({"mcpServers": catalog}, indent=2))
    # The same start-up allowance as the direct side: 50 servers starting at once on a
    # loaded 2-core machine can take longer than codemode's default 30 s handshake wait.
    config: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT}
    if privacy:
        config["privacy"] = True
    (base / "config.json").write_text(json.dumps(config))
    log = base / "codemode-serve.stderr"
    with log.open("w") as errlog:
        command = serve_command(base, executor, tools)
        async with _serve_client(command, errlog, log) as (client, defs):
            yield client, defs


@asynccontextmanager
async def _serve_client(params: StdioServerParameters, errlog: Any, log: Path) -> Any:
    ready = False
    try:
        async with Client(
            stdio_client(params, errlog=errlog), read_timeout_seconds=CALL_TIMEOUT
        ) as client:
            tools = await _list_all_tools(client)
            names = {t.name for t in tools}
            missing = {"run_code", "search_tools"} - names
            if missing:
                raise BenchError(
                    f"codemode serve lacks tools {sorted(missing)} (has {sorted(names)})"
                )
            with anyio.fail_after(CONNECT_TIMEOUT):
                warm = await client.call_tool("search_tools", {"query": "warm up", "limit": 1})
            if warm.is_error:
                raise BenchError(
                    f"codemode serve could not search tools: {result_text(warm)[:2000]}"
                )
            await _all_upstreams_listed(client)
            ready = True
            yield client, [tool_definition(t.name, t.description, t.input_schema) for t in tools]
    except Exception as exc:  # failures before the block get serve's stderr
        if ready:
            raise
        why = single_error(exc)
        raise BenchError(f"codemode serve failed to start: {why!r}{_stderr_tail(log)}") from exc


_NOT_LISTED = "[s['name'] + ': ' + s['status'] for s in tools.servers() if s['status'] != 'ok']"


async def _all_upstreams_listed(client: Client, timeout: float = CONNECT_TIMEOUT) -> None:
    """Wait until codemode has listed every upstream server (outside any transcript).

    codemode skips a server that fails to start (slow start-ups on a loaded machine time
    out) and retries it on the next listing; a benchmark run must not go on without one,
    or a discovery miss would be reported for what is a start-up failure.
    """
    missing: Any = None
    with anyio.move_on_after(timeout):
        while True:
            res = await client.call_tool("run_code", {"code": _NOT_LISTED})
            if res.is_error:
                raise BenchError(f"codemode serve could not list its servers: {result_text(res)}")
            missing = (res.structured_content or {}).get("value")
            if missing == []:
                return
            await anyio.sleep(1.0)
    raise BenchError(f"codemode serve could not list every server in {timeout:.0f} s: {missing}")


def codemode_caller(client: Client) -> Caller:
    async def call(name: str, args: dict[str, Any]) -> CallToolResult:
        return await client.call_tool(name, args)

    return call


# ---------------------------------------------------------------- results


@dataclass
class ScenarioResult:
    """One scenario under one ``codemode serve`` tool profile (``serve_tools``)."""

    name: str
    title: str
    serve_tools: str
    tokens_direct: int
    tokens_codemode: int
    reduction_pct: float
    round_trips_direct: int
    round_trips_codemode: int
    wall_ms_direct: float
    wall_ms_codemode: float
    input_tokens_billed_direct: int
    input_tokens_billed_codemode: int
    breakdown_direct: dict[str, int]
    breakdown_codemode: dict[str, int]
    extra: dict[str, Any] = field(default_factory=dict)
    tokenizer: str = ENCODING

    @classmethod
    def from_transcripts(
        cls,
        name: str,
        title: str,
        direct: Transcript,
        code: Transcript,
        serve_tools: str = "all",
        **extra: Any,
    ) -> ScenarioResult:
        parts = code.breakdown()
        extra["codemode_fixed_tokens"] = parts.get("instructions", 0) + parts.get("definitions", 0)
        return cls(
            name=name,
            title=title,
            serve_tools=serve_tools,
            tokens_direct=direct.tokens,
            tokens_codemode=code.tokens,
            reduction_pct=reduction(direct.tokens, code.tokens),
            round_trips_direct=direct.round_trips,
            round_trips_codemode=code.round_trips,
            wall_ms_direct=round(direct.wall_ms, 1),
            wall_ms_codemode=round(code.wall_ms, 1),
            input_tokens_billed_direct=direct.input_tokens_billed,
            input_tokens_billed_codemode=code.input_tokens_billed,
            breakdown_direct=direct.breakdown(),
            breakdown_codemode=parts,
            extra=extra,
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def reduction(direct: int, codemode: int) -> float:
    """Percent of ``direct`` that code mode saves, rounded to 0.01."""
    return round(100 * (1 - codemode / direct), 2)
