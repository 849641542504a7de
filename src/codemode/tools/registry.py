"""The host's table of tools and its single call pipeline.

Every tool call made by agents' code (and by the SDK) goes through ``ToolRegistry.call``::

    resolve name ──► the chain (codemode.chain.TOOL_STAGES) ──► source.call_tool ──► convert
    (ToolNotFound     observe, audit, policy, approval, budget,     (timeout)        (ToolError,
     + suggestions)   custom, privacy, validate (ToolArgumentError                    warnings)
                      + signature, after every layer that rewrites
                      the arguments)

Sources (MCP servers, Python callables) are listed lazily, once, and cached until
``invalidate`` (or a change of the source's optional ``listing_version``). Names that are
not Python identifiers are mapped with ``py_identifier``; names that collide after mapping
get ``_2``, ``_3``... in a predictable order (the name that is already an identifier keeps
it, the others follow sorted), and discovery shows the original names.

What a call is to the layers, and the registry's own two stages (argument checks, the call
to the source with its result checks), live in ``codemode.tools.pipeline``; the names are
re-exported here, where layers have always imported them.
"""

from __future__ import annotations

import builtins
import dataclasses
import difflib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from codemode.chain import DEFAULT_STAGE, TOOL_STAGES, Chain
from codemode.context import CallContext, current_context
from codemode.errors import (
    CodemodeError,
    ConfigError,
    ToolArgumentError,
    ToolDenied,
    ToolError,
    ToolNotFound,
)
from codemode.hostapi import warn_caller
from codemode.tools import convert, stubs
from codemode.tools.entries import ServerEntry, ToolEntry, assign_names, list_tools
from codemode.tools.pipeline import (
    APPROVAL_PENDING,
    Middleware,
    NextCall,
    ToolCall,
    check_arguments,
    invoke,
)
from codemode.tools.search import Detail, ToolIndex, check_detail, render
from codemode.tools.sources.python import PythonSource
from codemode.tools.spec import ToolSource, ToolSpec

if TYPE_CHECKING:
    from codemode.hostapi import HostAPI

__all__ = [
    "APPROVAL_PENDING",
    "MAX_WARNINGS",
    "RESERVED_SERVER_NAMES",
    "RETRY_FAILED_AFTER",
    "Middleware",
    "NextCall",
    "Progress",
    "ToolCall",
    "ToolFilter",
    "ToolRegistry",
]

log = logging.getLogger(__name__)

# Names the worker's ``tools`` object uses for its own methods: servers get a ``_`` suffix.
RESERVED_SERVER_NAMES = frozenset({"search", "list", "describe", "servers", "refresh"})
MAX_WARNINGS = 500
_RELIST_AFTER_MISS = 2.0
RETRY_FAILED_AFTER = 30.0
"""Discovery (search, list, servers) retries a server that failed this long ago, not before:
one dead server must not cost every search its full connect timeout. Calls to its tools
always try again."""

Progress = Callable[[str, str], None]
"""``progress(server, event)``: ``"connecting"``, ``"ok"`` or ``"failed"``."""

ToolFilter = Callable[[ToolSpec], str | None]
"""``hidden(spec) -> why | None``: a reason hides the tool from discovery (not from calls)."""


class ToolRegistry:
    """Tools of every source, discovery over them, and the one call pipeline."""

    def __init__(
        self, sources: Iterable[ToolSource] = (), *, default_timeout: float | None = None
    ) -> None:
        self.default_timeout = default_timeout
        self._servers: dict[str, ServerEntry] = {}  # by original name
        self._by_py: dict[str, ServerEntry] = {}
        self._chain: Chain[ToolCall, Any] = Chain("tool-call", TOOL_STAGES, self._invoke)
        self._chain.use(self._validate, stage="validate")
        self._index: ToolIndex | None = None
        self._hidden: list[ToolFilter] = []
        self.workspace: str | None = None
        """The workspace this registry belongs to: calls whose context names none carry it."""
        self._warnings: deque[str] = deque(maxlen=MAX_WARNINGS)
        self._logged: set[str] = set()
        self.progress: Progress | None = None
        for s in sources:
            self.add_source(s)

    # -- sources -------------------------------------------------------------------
    def add_source(self, source: ToolSource, *, replace: bool = False) -> None:
        name = source.name
        if name in self._servers and not replace:
            raise ConfigError(f"a tool server named {name!r} is already registered")
        self._servers[name] = ServerEntry(source, name)
        self._rename()

    def remove_source(self, name: str) -> ToolSource | None:
        """Forget a source (the caller closes it)."""
        server = self._servers.pop(name, None)
        self._rename()
        return server.source if server else None

    def sources(self) -> list[ToolSource]:
        return [s.source for s in self._servers.values()]

    def register(
        self,
        fn: Callable[..., Any],
        *,
        server: str = "local",
        name: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, Any] | None = None,
    ) -> ToolSpec:
        """Expose a Python callable (sync or async) as ``server.name``; ``annotations`` are
        MCP tool annotations (``{"readOnlyHint": True}``) that policies believe."""
        entry = self._servers.get(server)
        if entry is None:
            self.add_source(PythonSource(server))
            entry = self._servers[server]
        if not isinstance(entry.source, PythonSource):
            raise ConfigError(f"server {server!r} is not a Python tool server; pick another name")
        spec = entry.source.add(fn, name=name, description=description, annotations=annotations)
        self.invalidate(server)
        return spec

    def invalidate(self, server: str | None = None) -> None:
        """Re-list ``server`` (all servers if None) on next use, e.g. after a reconnect."""
        for s in self._servers.values() if server is None else [self._server(server)]:
            s.tools = None
            s.stub = None
            s.refresh = True
        self._index = None

    def _rename(self) -> None:
        mapping = assign_names(self._servers, RESERVED_SERVER_NAMES)
        self._by_py = {}
        for name, s in self._servers.items():
            if s.tools is not None and s.py_name != mapping[name]:
                for t in s.tools.values():  # listed under the old name: rules use the new
                    t.spec = _named(t.spec, f"{mapping[name]}.{t.py_name}")
            s.py_name = mapping[name]
            s.stub = None
            self._by_py[s.py_name] = s
        self._index = None

    def use(self, middleware: Middleware, stage: str = DEFAULT_STAGE) -> None:
        """Add ``middleware(call, call_next)`` at ``stage`` of ``codemode.chain.TOOL_STAGES``;
        within a stage the first added runs outermost."""
        self._chain.use(middleware, stage)

    def hide(self, hidden: ToolFilter) -> None:
        """Hide the tools for which ``hidden(spec)`` gives a reason from discovery (search,
        lists, stubs); naming one exactly (``describe``, a call) says why it is refused."""
        self._hidden.append(hidden)
        self.invalidate()

    def _shown(self, t: ToolEntry) -> bool:
        return not any(h(t.spec) for h in self._hidden)

    def _why_hidden(self, t: ToolEntry) -> str | None:
        return next((why for h in self._hidden if (why := h(t.spec))), None)

    def _visible(self, tools: dict[str, ToolEntry] | None) -> builtins.list[ToolEntry]:
        if not tools:
            return []
        if not self._hidden:
            return builtins.list(tools.values())
        return [t for t in tools.values() if self._shown(t)]

    def layers(self) -> builtins.list[tuple[str, Middleware]]:
        """The chain's (stage, layer), outermost first (argument validation included)."""
        return self._chain.layers()

    @property
    def warnings(self) -> list[str]:
        return list(self._warnings)

    def warn(self, message: str) -> None:
        """Record ``message``; each distinct message is logged once (a bad tool called in a
        loop must not flood the log)."""
        self._warnings.append(message)
        warn_caller(message)
        if message not in self._logged:
            if len(self._logged) >= MAX_WARNINGS:
                self._logged.clear()
            self._logged.add(message)
            log.warning("%s", message)

    # -- listing -------------------------------------------------------------------
    def _server(self, name: str) -> ServerEntry:
        s = self._by_py.get(name) or self._servers.get(name)
        if s is None:
            known = sorted(self._by_py)
            close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            listing = ", ".join(known) or "none"
            raise ToolNotFound(
                f"no tool server {name!r}{hint} (servers: {listing})",
                server=name,
                suggestions=close,
            )
        return s

    def _fresh(self, s: ServerEntry) -> bool:
        return s.tools is not None and getattr(s.source, "listing_version", None) == s.version

    async def _ensure(self, s: ServerEntry, *, force: bool = False) -> dict[str, ToolEntry]:
        if not force and self._fresh(s):
            assert s.tools is not None
            return s.tools
        async with s.lock():
            if not force and self._fresh(s):
                assert s.tools is not None
                return s.tools
            version = getattr(s.source, "listing_version", None)
            try:
                specs = await list_tools(s.source, refresh=force or s.refresh)
            except CodemodeError as exc:
                s.error = str(exc)
                raise
            s.error = None
            s.refresh = False
            specs = self._first_of_each(s, specs)
            mapping = assign_names(spec.name for spec in specs)
            tools = {
                mapping[spec.name]: ToolEntry(
                    _named(spec, f"{s.py_name}.{mapping[spec.name]}"), s, mapping[spec.name]
                )
                for spec in specs
            }
            s.tools = tools
            s.by_original = {t.spec.name: t for t in tools.values()}
            s.version = version
            s.listed_at = anyio.current_time()
            s.stub = None
            self._index = None
            return tools

    def _first_of_each(
        self, s: ServerEntry, specs: builtins.list[ToolSpec]
    ) -> builtins.list[ToolSpec]:
        """A server that lists one name twice: the first is kept, and the caller told.
        Each later one silently replaced the first, whose schema the arguments were then
        checked against; the server alone decides which of them a call runs."""
        kept: dict[str, ToolSpec] = {}
        twice: dict[str, int] = {}
        for spec in specs:
            if spec.name in kept:
                twice[spec.name] = twice.get(spec.name, 1) + 1
            else:
                kept[spec.name] = spec
        for name, count in sorted(twice.items()):
            self.warn(
                f"server {s.py_name!r} lists {count} tools named {name!r}: codemode shows and "
                "checks arguments against the first it lists (the server decides which one a "
                "call runs)"
            )
        return list(kept.values()) if twice else specs

    async def _all(self) -> list[ServerEntry]:
        """Every server, listed concurrently (each within its own deadline); a server that
        fails is recorded, reported to the caller, and skipped."""
        now = anyio.current_time()
        pending = [
            s
            for s in self._servers.values()
            if not self._fresh(s)
            and not (s.problem is not None and now - s.failed_at < RETRY_FAILED_AFTER)
        ]

        async def one(s: ServerEntry) -> None:
            before = s.problem
            self._progress(s.py_name, "connecting")
            try:
                await self._ensure(s)
            except CodemodeError as exc:
                s.problem = _problem(s.py_name, exc)
                s.failed_at = anyio.current_time()
                self._progress(s.py_name, "failed")
                if s.problem != before:
                    self.warn(s.problem)
            else:
                s.problem = None
                self._progress(s.py_name, "ok")

        if pending:
            async with anyio.create_task_group() as tg:
                for s in pending:
                    tg.start_soon(one, s)
        for p in self.problems():
            warn_caller(p)  # every run that looked gets told, not only the first
        return [s for s in self._servers.values() if s.tools is not None]

    def _progress(self, server: str, event: str) -> None:
        if self.progress is not None:
            self.progress(server, event)

    def problems(self) -> builtins.list[str]:
        """One sentence per server that failed its last listing (for results and warnings),
        e.g. ``server 'slow' did not answer within 30 s (last stderr: ...)``."""
        return [s.problem for s in self._servers.values() if s.problem is not None]

    async def connect_all(self) -> builtins.list[str]:
        """Connect and list every server now, concurrently; returns the problems."""
        await self._all()
        return self.problems()

    async def resolve(self, server: str, tool: str) -> ToolEntry:
        s = self._server(server)
        tools = await self._ensure(s)
        t = tools.get(tool) or s.by_original.get(tool)
        if t is None and anyio.current_time() - s.listed_at > _RELIST_AFTER_MISS:
            tools = await self._ensure(s, force=True)  # the server may have new tools
            t = tools.get(tool) or s.by_original.get(tool)
        if t is None:
            close = difflib.get_close_matches(tool, list(tools), n=3, cutoff=0.5)
            if not close:
                close = [n for n in tools if tool.lower() in n.lower()][:3]
            sugg = [f"{s.py_name}.{c}" for c in close]
            hint = f"; did you mean {', '.join(sugg)}?" if sugg else ""
            raise ToolNotFound(
                f"no tool {tool!r} on server {s.py_name!r}{hint} (tools.search(query) finds tools)",
                server=s.py_name,
                tool=tool,
                suggestions=sugg,
            )
        return t

    # -- the call pipeline ---------------------------------------------------------
    async def call(
        self,
        server: str,
        tool: str,
        args: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        context: CallContext | None = None,
    ) -> Any:
        """Call ``server.tool`` with ``args``; returns the converted value or raises ToolError.

        ``context`` says whose call it is; by default the one current in this task (the
        calling run's, for calls from a session's code).
        """
        s = self._by_py.get(server) or self._servers.get(server)
        t = None
        if s is not None and s.tools is not None and self._fresh(s):
            t = s.tools.get(tool) or s.by_original.get(tool)
        if t is None:
            t = await self.resolve(server, tool)
        if args is None:
            args = {}
        elif not isinstance(args, dict):
            raise ToolArgumentError(
                f"arguments must be a dict, not {type(args).__name__}\nsignature: {t.signature}",
                server=t.server.py_name,
                tool=t.py_name,
            )
        ctx = context if context is not None else current_context.get()
        if ctx.workspace is None and self.workspace is not None:
            ctx = dataclasses.replace(ctx, workspace=self.workspace)
        call = ToolCall(
            t.spec.server,
            t.spec.name,
            t.validator.normalize(args),  # Python spellings -> the schema's names
            t.spec,
            timeout if timeout is not None else self.default_timeout,
            ctx,
        )
        return await self._chain(call)

    # Plain functions handing back the next awaitable: no frame of their own resumed at
    # every await of every call. A refusal is raised where the outer layer calls them,
    # inside its ``await call_next(call)``, as it would be from a coroutine.
    def _validate(self, call: ToolCall, call_next: NextCall) -> Awaitable[Any]:
        check_arguments(call, self._servers.get(call.server))
        return call_next(call)

    def _invoke(self, call: ToolCall) -> Awaitable[Any]:
        return invoke(call, self._servers.get(call.server), self.warn)

    # -- discovery -----------------------------------------------------------------
    async def tool_index(self) -> ToolIndex:
        """The discovery index ``search`` ranks with (rebuilt when the tools change)."""
        servers = await self._all()
        if self._index is None:
            docs = [t.doc() for s in servers for t in self._visible(s.tools)]
            self._index = ToolIndex(docs)
        return self._index

    async def search(
        self, query: str, detail: Detail | str = "name", limit: int = 10
    ) -> list[dict[str, Any]]:
        """Tools ranked for ``query`` (BM25 over names, descriptions, parameter names)."""
        level = check_detail(detail)
        index = await self.tool_index()
        return [render(d, level) for d in index.search(str(query), int(limit))]

    async def list(
        self, server: str | None = None, detail: Detail | str = "name"
    ) -> builtins.list[dict[str, Any]]:
        """Every tool (of ``server`` if given), in the server's order."""
        level = check_detail(detail)
        servers = [self._server(server)] if server is not None else await self._all()
        out: builtins.list[dict[str, Any]] = []
        for s in servers:
            tools = await self._ensure(s) if server is not None else (s.tools or {})
            out += [render(t.doc(), level) for t in self._visible(tools)]
        return out

    async def describe(self, name: str) -> dict[str, Any]:
        """Everything about one tool: ``server.tool``, in Python or original names."""
        t = await self._find(name)
        out = render(t.doc(), "full")
        out["original"] = {"server": t.spec.server, "tool": t.spec.name}
        params = stubs.parameters(t.spec, stubs.TypeRenderer(t.spec.input_schema), "")
        out["parameters"] = [
            {"name": p.name, "original": p.original, "required": p.required, "type": p.annotation}
            | ({} if p.required else {"default": p.default})
            for p in params
        ]
        out["docstring"] = stubs.docstring(t.spec, params)
        key = convert.wrapped_result_key(t.spec.output_schema)
        if key is not None and t.spec.output_schema is not None:
            # What the code receives: the SDK's {"result": ...} wrapper is unwrapped.
            out["result_schema"] = t.spec.output_schema["properties"][key]
        if t.spec.title:
            out["title"] = t.spec.title
        if t.spec.annotations:
            out["annotations"] = dict(t.spec.annotations)
        return out

    async def _find(self, name: str) -> ToolEntry:
        """A tool discovery may show (a hidden one raises ``ToolDenied`` saying why)."""
        t = await self._find_any(name)
        why = self._why_hidden(t) if self._hidden else None
        if why is not None:
            raise ToolDenied(why, server=t.server.py_name, tool=t.py_name, reason="policy")
        return t

    async def _find_any(self, name: str) -> ToolEntry:
        name = str(name).strip()
        if "." not in name:
            hits = [
                t
                for s in await self._all()
                for t in self._visible(s.tools)
                if name in (t.py_name, t.spec.name)
            ]
            if len(hits) == 1:
                return hits[0]
            found = ", ".join(t.qualified for t in hits)
            raise ToolNotFound(
                "name tools as 'server.tool'" + (f" (matches: {found})" if hits else ""),
                tool=name,
                suggestions=[t.qualified for t in hits],
            )
        errors: builtins.list[ToolNotFound] = []
        # Original server names may contain dots: try every split, leftmost server first.
        parts = name.split(".")
        for i in range(1, len(parts)):
            server, tool = ".".join(parts[:i]), ".".join(parts[i:])
            try:
                return await self.resolve(server, tool)
            except ToolNotFound as exc:
                errors.append(exc)
        # Prefer "no such tool on a known server" over "no such server".
        raise next((e for e in errors if e.tool), errors[0])

    async def servers(self, *, connect: bool = True) -> builtins.list[dict[str, Any]]:
        """Each server: Python name, original name, tool count, and status.

        ``connect=False`` reports only what is known, without listing (or connecting) any.
        """
        if connect:
            await self._all()
        out = []
        for s in self._servers.values():
            row: dict[str, Any] = {"name": s.py_name}
            if s.py_name != s.name:
                row["original"] = s.name
            row["tools"] = len(self._visible(s.tools)) if s.tools is not None else None
            if s.error is not None:
                row["status"] = f"error: {s.error}"
                if s.problem is not None:
                    row["problem"] = s.problem
            else:
                row["status"] = "ok" if s.tools is not None else "not listed"
            desc = getattr(s.source, "description", None)
            if isinstance(desc, str) and desc:
                row["description"] = desc
            out.append(row)
        return out

    # -- stubs -----------------------------------------------------------------------
    async def stub_items(
        self,
    ) -> builtins.list[tuple[str, str, builtins.list[tuple[ToolSpec, str]]]]:
        """(python server name, original name, [(spec, python tool name)]) for every server."""
        return [
            (s.py_name, s.name, [(t.spec, t.py_name) for t in self._visible(s.tools)])
            for s in await self._all()
        ]

    async def stub_module(self, module: str) -> str | None:
        """Source of ``servers``, ``servers.<x>`` or ``servers.<x>.<tool>``; None if unknown."""
        parts = module.split(".")
        if parts[0] != "servers" or len(parts) > 3:
            return None
        if len(parts) == 1:
            return stubs.package_source({s.py_name: s.name for s in self._servers.values()})
        s = self._by_py.get(parts[1])
        if s is None:
            return None
        tools = await self._ensure(s)
        shown = self._visible(tools)
        if len(parts) == 2:
            if s.stub is None:
                items = stubs.stub_tools([(t.spec, t.py_name) for t in shown])
                s.stub = stubs.server_module_source(s.name, items)
            return s.stub
        t = tools.get(parts[2])
        if t is None or not self._shown(t):
            return None
        item = stubs.stub_tools([(x.spec, x.py_name) for x in shown])
        return stubs.tool_module_source(next(i for i in item if i.py_name == t.py_name))

    # -- the worker's side -------------------------------------------------------------
    def install(self, host: HostAPI) -> None:
        """Serve the worker's ``tools.*`` calls from this registry (``codemode.tools.rpc``)."""
        from codemode.tools.rpc import TOOL_METHODS

        TOOL_METHODS.install(host, self)

    async def aclose(self) -> None:
        """Close every source; one failing to close does not keep the others open."""
        for s in self._servers.values():
            try:
                await s.source.aclose()
            except Exception as exc:  # noqa: BLE001 - keep closing the others
                log.warning("closing tool server %r failed: %s", s.name, exc)

    async def __aenter__(self) -> ToolRegistry:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _problem(server: str, exc: CodemodeError) -> str:
    message = exc.message if isinstance(exc, ToolError) else str(exc)
    if message.startswith("did not answer"):
        return f"server {server!r} {message}"
    return f"server {server!r} could not be listed: {message}"


def _named(spec: ToolSpec, exposed: str) -> ToolSpec:
    """``spec`` with its ``alias`` when the code calls it ``exposed``, another name than its
    own ``qualified_name``: a rule written with the name discovery shows must match it.
    (Again when its server is renamed, a server of a colliding name being added later.)"""
    alias = "" if exposed == spec.qualified_name else exposed
    return spec if spec.alias == alias else dataclasses.replace(spec, alias=alias)
