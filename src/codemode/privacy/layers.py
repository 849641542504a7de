"""Privacy on codemode's two chains and on every reply of ``codemode serve``.

- the tool layer (tool-call chain, stage ``privacy``, inside policy/approval/budget/audit
  and outside ``validate``): restores tokens in the arguments of sinks before they are
  validated and sent, and tokenizes the result (and any error) before it goes back into
  the sandbox;
- the reveal layer (stage ``audit``): gives the layers between it and the privacy stage
  ``ToolCall.revealed()``, the arguments as that stage will restore them (a policy rule on
  a recipient's domain must see the address, not its token);
- the run hook (run chain, stage ``privacy``, innermost): the second net over the run's
  stdout, stderr, value, error and warnings, for values the code found elsewhere (a
  file, a string it was given);
- the reply layer (``codemode serve``): the same net over every server tool's reply,
  the memory tools' (``load_artifact``, ``get_state``...) included.

One registry serves every session of a workspace, so layers find their ``Privacy`` by
the call's context: one per workspace and tenant (``vault.scope: workspace``) or per
client session (``session``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import is_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from codemode.chain import NextRun, RunEvent
from codemode.context import EPHEMERAL_CLIENT, CallContext
from codemode.errors import CodemodeError, ConfigError, ToolError
from codemode.hostapi import warn_caller
from codemode.redact import REDACTED, redact_text
from codemode.result import ExecutionResult

from .config import PrivacyConfig
from .engine import Privacy
from .stream import StreamScanner
from .vault import FileStore, MemoryStore, RedisStore, Vault, VaultStore, load_key
from .vaultkey import stranded, tenant_key

if TYPE_CHECKING:
    from codemode.server.toolset import Call
    from codemode.tools.registry import Middleware, NextCall, ToolCall

__all__ = [
    "engine_for",
    "engine_hook",
    "reply_layer",
    "reveal_layer",
    "run_hook",
    "scrub",
    "stream_scanner",
    "tool_layer",
]

log = logging.getLogger(__name__)

THREAD_ABOVE = 200_000
"""Characters above which a scan runs in a worker thread (the event loop stays free)."""
MAX_SESSION_ENGINES = 256
"""Engines kept of client sessions (``vault.scope: session``), and as many of callers
without one."""

_engines: OrderedDict[tuple[Any, ...], Privacy] = OrderedDict()
# Keyed by id(config): each engine holds its config, so the id is not reused meanwhile.
_lock = threading.Lock()

T = TypeVar("T")


def vault_dir(workspace: Path, tenant: str) -> Path:
    """Where a workspace's vault lives: beside ``files/``, never inside it."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in tenant) or "default"
    return workspace / "privacy" / "vault" / safe


def engine_for(config: PrivacyConfig, context: CallContext) -> Privacy:
    """The ``Privacy`` of ``context``'s workspace and tenant (or client session)."""
    per_session = config.vault.scope == "session"
    owner = (context.client or context.session_id) if per_session else None
    key = (id(config), context.workspace, context.tenant, owner)
    with _lock:
        got = _engines.get(key)
        if got is not None:
            _engines.move_to_end(key)
            return got
        engine = _build(config, context, persist=not per_session)
        _engines[key] = engine
        if per_session:
            # Callers without a session (one name each) are evicted among themselves: a
            # burst of them must not push out a session's engine, and its in-memory vault
            # with it, while the session still uses its tokens.
            mine = _ephemeral(owner)
            sessions = [k for k in _engines if k[3] is not None and _ephemeral(k[3]) == mine]
            for old in sessions[: max(0, len(sessions) - MAX_SESSION_ENGINES)]:
                del _engines[old]
        global _log_engines
        logged = {k[:3]: e for k, e in _engines.items()}  # one per config, workspace, tenant
        _log_engines = tuple(logged.values())
        _install_log_filter()
        return engine


def _ephemeral(owner: object) -> bool:
    return isinstance(owner, str) and owner.startswith(EPHEMERAL_CLIENT)


def _build(config: PrivacyConfig, context: CallContext, *, persist: bool) -> Privacy:
    from codemode.workspace import Workspace, tenant_workspace

    workspace = Path(context.workspace) if context.workspace else None
    servers: dict[str, Any] = {}
    settings: Any = None
    # A tenant's of serve --tenants, as it was opened: its settings (a Redis vault), its
    # servers and its keys come from its env_file, never from the server's environment.
    tenant = tenant_workspace(context.workspace)
    if tenant is not None:
        servers, settings = tenant.servers, tenant.settings
    elif workspace is not None:
        try:
            opened = Workspace.open(workspace)
            servers, settings = opened.servers, opened.settings
        except ConfigError as exc:
            log.warning("privacy: cannot read the configuration of %s: %s", workspace, exc)
    if workspace is not None:
        _warn_unknown_servers(config, servers, workspace)
    store: Any
    if persist and workspace is not None:
        key, _, store = vault_store(config, workspace, settings, context.tenant, tenant)
    else:
        key, _ = load_key(config.vault, None, env={})
        store = MemoryStore()
    vault = Vault(key, store, ttl=config.vault.ttl.total_seconds())
    return Privacy(config, vault, servers=servers, workspace=workspace)


def vault_store(
    config: PrivacyConfig, workspace: Path, settings: Any, name: str, tenant: Any
) -> tuple[bytes, str, VaultStore]:
    """The key (and where it came from) and the store of the vault of ``workspace`` and
    tenant ``name``; ``tenant``: its ``Workspace`` under ``serve --tenants``, whose key may
    be the server's when its vault was written before tenants had their own (vaultkey)."""

    def store_for(key: bytes) -> VaultStore:
        if settings is not None and settings.storage == "redis" and settings.redis_url:
            return RedisStore(
                settings.redis_url, f"{settings.redis_prefix}:privacy:{name}:vault", key
            )
        return FileStore(vault_dir(workspace, name), key)

    if tenant is None:
        key, where = load_key(config.vault, workspace)
        return key, where, store_for(key)
    env, own = tenant.environment, tenant.settings.tenant
    key, where = tenant_key(config.vault, workspace, env, own, store_for)
    store = store_for(key)
    stranded(store, key, vault_dir(workspace, name), workspace, own)  # warns
    return key, where, store


_warned: set[tuple[Path, str]] = set()


def _warn_unknown_servers(config: PrivacyConfig, servers: dict[str, Any], workspace: Path) -> None:
    """Say so when ``privacy.servers`` names no server of ``mcp.json``: a misspelt
    ``"sink": false`` would otherwise do nothing, and that server receive real values."""
    from codemode.tools.spec import py_identifier

    known = {*servers, *(py_identifier(name) for name in servers)}
    for name in config.servers:
        if name in known or (workspace, name) in _warned:
            continue
        _warned.add((workspace, name))
        log.warning(
            "privacy.servers names %r, which is no server of %s's mcp.json (servers: %s); "
            "unless a tool source registered in code is named so, its settings do nothing",
            name,
            workspace,
            ", ".join(sorted(servers)) or "none",
        )


def _engine_of(context: CallContext) -> Privacy | None:
    """The engine privacy uses for ``context`` (None: privacy is off there)."""
    with _lock:
        return next(
            (
                e
                for k, e in reversed(_engines.items())
                if k[1] == context.workspace
                and k[2] == context.tenant
                and k[3] in (None, context.client, context.session_id)
            ),
            None,
        )


def scrub(value: Any, context: CallContext) -> Any:
    """``value`` as the model may see it, for layers outside the privacy stage (audit,
    traces, metrics) that write what they saw: tokens for the values the vault of
    ``context`` knows or detects now. Unchanged when privacy is off for ``context``."""
    engine = _engine_of(context)
    if engine is None:
        return value
    out, _ = engine.protect(value, count=False)
    engine.vault.flush_soon()
    return out


def stream_scanner(context: CallContext, **window: Any) -> StreamScanner | None:
    """A scanner for output streamed during a run of ``context`` (``feed``/``close``);
    None when privacy is off there. See ``codemode.privacy.stream``."""
    engine = _engine_of(context)
    return StreamScanner(engine, **window) if engine is not None else None


def reset_engines() -> None:
    """Forget every engine of this process (tests; a changed key file)."""
    global _log_engines
    with _lock:
        engines = list(_engines.values())
        _engines.clear()
        _log_engines = ()  # nor keeps the log net them (and their vaults' values) alive
    for engine in engines:  # a later engine of the same vault reads what they wrote
        engine.vault.wait()


async def _off_loop(size: int, fn: Callable[[], T]) -> T:
    if size > THREAD_ABOVE:
        return await anyio.to_thread.run_sync(fn)
    return fn()


async def _flush(engine: Privacy) -> None:
    await anyio.to_thread.run_sync(engine.vault.flush)


def _after_send(fn: Callable[[], None]) -> None:
    """``fn`` on the event loop's next turn: after what the caller still does with a tool's
    result before it waits (encoding it for the worker), so a thread ``fn`` starts (the
    held-values index) runs while the host waits for the sandbox, not beside that encoding
    for the GIL. Nothing waits for it: a scan that needs the index builds what is missing.
    Right away when the loop is not asyncio's."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        fn()
        return
    loop.call_soon(fn)


# --------------------------------------------------------------------------- tool calls


def tool_layer(config: PrivacyConfig) -> Middleware:
    async def privacy(call: ToolCall, call_next: NextCall) -> Any:
        engine = engine_for(config, call.context)
        where = f"{call.server}.{call.tool}"
        names = call.spec.names  # a rule may name the tool as the code calls it
        sink = engine.is_sink(call.server, call.tool, *names, in_workspace=call.spec.in_workspace)
        args, restored = engine.restore(call.args, sink=sink, where=where)
        if not sink:
            # A non-sink lives in the model's world, of tokens: real values the code holds
            # (read from a file, or from a server whose results are not scanned) reach it
            # as tokens, wherever they are in the arguments, as they would leave a run.
            plain = args
            args, report = await _off_loop(
                _approx_size(plain),
                lambda: engine.protect(plain, where=f"the arguments of {where}"),
            )
            for w in report.warnings:
                warn_caller(w)
            if args is not plain:
                engine.vault.flush_soon()
                engine.index_soon()
        # A new ToolCall: layers outside this one (audit) keep the tokenized arguments.
        inner = call if args is call.args else replace(call, args=args)
        try:
            result = await call_next(inner)
        except CodemodeError as exc:
            raise _scrub_error(engine, exc, restored) from exc.__cause__
        if not engine.scans(call.server, call.tool, *names):
            return engine.replace_restored(result, restored)
        size = _approx_size(result)
        try:
            out, report = await _off_loop(
                size, lambda: engine.protect(result, where=where, literal=restored)
            )
        except ToolError as exc:
            exc.server, exc.tool = exc.server or call.server, exc.tool or call.tool
            raise
        for w in report.warnings:
            warn_caller(w)
        # Persisted in the background, while the sandbox takes the result; the run's
        # hook waits for it before the run's result goes back (``_flush``). The new
        # values are indexed meanwhile too, for the scans that look for held values,
        # once the result is on its way (``_after_send``).
        engine.vault.flush_soon()
        _after_send(engine.index_soon)
        return out

    return privacy


def reveal_layer(config: PrivacyConfig) -> Middleware:
    """Stage ``audit``, outside every layer that judges a call (policy, approval, budget,
    custom): lets them ask for the real arguments (``ToolCall.revealed``), computed on the
    host when asked, exactly as the privacy stage will restore them for the tool. The call's
    ``args`` keep the tokens, so what audit and traces record does not change.

    An error raised between here and the privacy stage never passed its net: a refusal
    quoting a real value it was shown, a policy rule naming an address, a person's reason
    for a "no". It is scrubbed here (the values revealed by their own tokens), before audit
    records it and before the code sees it; so is any other failure of a layer once it was
    shown real values (as a ``ToolError``), and an answer a layer gave in the tool's place."""

    async def reveal(call: ToolCall, call_next: NextCall) -> Any:
        shown: dict[str, str] = {}

        def real_args(c: ToolCall) -> dict[str, Any]:
            engine = engine_for(config, c.context)
            # Every name of the tool, as the privacy stage decides it: a rule written with
            # the name the code calls (``my_outbox``) made the tool a sink here only.
            sink = engine.is_sink(c.server, c.tool, *c.spec.names, in_workspace=c.spec.in_workspace)
            args, restored = engine.restore(c.args, sink=sink, where=f"{c.server}.{c.tool}")
            shown.update(restored)
            return dict(args)

        call.reveal = real_args
        try:
            result = await call_next(call)
        except CodemodeError as exc:
            engine = engine_for(config, call.context)
            raise _scrub_error(engine, exc, shown) from exc.__cause__
        except Exception as exc:
            if not shown:
                raise
            # A layer's own failure after it was shown real values: its text would reach
            # the code as a HostError and the host's log with its traceback; neither may
            # hold them (``from None``: nor may the chained original).
            engine = engine_for(config, call.context)
            text = engine.protect_text(f"{type(exc).__name__}: {exc}", literal=shown)
            raise ToolError(text, server=call.spec.py_server, tool=call.spec.py_name) from None
        if not shown:
            return result
        # What a layer answered in the tool's place (a dry run, a cached or made-up answer)
        # never passed the privacy stage either: the values it was shown go back as their
        # tokens. (What the tool answered passed it: nothing left to replace there.)
        engine = engine_for(config, call.context)
        return engine.replace_restored(result, shown)

    return reveal


def _scrub_error(engine: Privacy, exc: CodemodeError, restored: dict[str, str]) -> CodemodeError:
    if isinstance(exc, ToolError):
        return engine.protect_error(exc, restored)
    text = engine.protect_text(str(exc), literal=restored)
    if text == str(exc):
        return exc
    return type(exc)(text) if type(exc).__init__ is CodemodeError.__init__ else ToolError(text)


def _approx_size(value: Any, budget: int = 2_000) -> int:
    """Characters of text in ``value``, looking at no more than ``budget`` items (past
    that, or past ``THREAD_ABOVE`` characters, it is "large")."""
    size, stack = 0, [value]
    while stack:
        budget -= 1
        if budget < 0 or size > THREAD_ABOVE:
            return THREAD_ABOVE + 1
        v = stack.pop()
        if isinstance(v, str | bytes):
            size += len(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
        else:
            size += len(getattr(v, "data", b"")) if hasattr(v, "mime_type") else 8
    return size


# --------------------------------------------------------------------------- runs


def engine_hook(
    config: PrivacyConfig,
) -> Callable[[RunEvent, NextRun], Awaitable[ExecutionResult]]:
    """Stage ``audit`` of the run chain: the run's engine exists before any stage outside
    privacy may refuse the run (code checks, a budget), so that audit's record of the
    code goes through ``scrub`` even then: the privacy stage, which would build it, is
    never reached by a refused run, and ``scrub`` finds only engines that exist (none
    for a new session's or process's first run: its code was written in clear)."""

    async def privacy_engine(event: RunEvent, call_next: NextRun) -> ExecutionResult:
        engine_for(config, event.context)
        return await call_next(event)

    return privacy_engine


def run_hook(config: PrivacyConfig) -> Callable[[RunEvent, NextRun], Awaitable[ExecutionResult]]:
    async def privacy(event: RunEvent, call_next: NextRun) -> ExecutionResult:
        # Before the run: layers outside privacy find it (``scrub``) from the first call on.
        engine = engine_for(config, event.context)
        live = None
        if event.on_output is not None:
            # Innermost stage: every listener outside (the MCP client's progress notes,
            # ``Session.stream``, ``--live``, observability) gets scanned chunks only.
            live = LiveOutput(engine, event.on_output)
            event = replace(event, on_output=live)
        try:
            result = await call_next(event)
        finally:
            if live is not None:
                await live.close()  # the held tails, before the result (as promised)
        size = len(result.stdout) + len(result.stderr) + _approx_size(result.value)
        out = await _off_loop(size, lambda: engine.protect_result(result))
        await _flush(engine)
        return out

    return privacy


class LiveOutput:
    """A run's ``on_output`` behind one ``StreamScanner`` per stream: a value split
    across chunks is still one token, and nothing unscanned reaches the listener."""

    def __init__(self, engine: Privacy, on_output: Callable[[str, str], Any]) -> None:
        self.engine = engine
        self.on_output = on_output
        self.scanners: dict[str, StreamScanner] = {}
        self.stopped = False

    async def __call__(self, stream: str, text: str) -> bool | None:
        if self.stopped:
            return False
        scanner = self.scanners.get(stream)
        if scanner is None:
            scanner = self.scanners[stream] = StreamScanner(self.engine)
        return await self._send(stream, scanner.feed(text))

    async def _send(self, stream: str, text: str) -> bool | None:
        if not text:
            return None
        got = self.on_output(stream, text)
        if inspect.isawaitable(got):
            got = await got
        if got is False:
            self.stopped = True
        return got  # type: ignore[no-any-return]

    async def close(self) -> None:
        for stream, scanner in self.scanners.items():
            rest = scanner.close()
            if self.stopped:
                break
            try:
                await self._send(stream, rest)
            except Exception:  # as codemode.live does: the result still holds it all
                log.exception("on_output failed on the end of a run's streamed output")
                break
        # Not counted in the metrics: the run's result holds the same output, counted.
        await _flush(self.engine)


# --------------------------------------------------------------------------- server replies


def reply_layer(config: PrivacyConfig) -> Callable[[Call, str, Any], Awaitable[Any]]:
    async def privacy(call: Call, tool: str, out: Any) -> Any:
        ws = call.server.workspace
        settings = call.server.settings
        context = CallContext(
            tenant=getattr(settings, "tenant", "default"),
            workspace=str(ws.path) if ws is not None else None,
            client=call.session_key,
        )
        engine = engine_for(config, context)
        result = await _off_loop(_approx_size(out), lambda: protect_reply(engine, tool, out))
        await _flush(engine)
        return result

    return privacy


def protect_reply(engine: Privacy, tool: str, out: Any) -> Any:
    """A server tool's answer with the net applied: a ``Reply`` (text and data), an MCP
    ``CallToolResult`` (text content and structured content), text or data. Duck-typed:
    this package does not import the MCP SDK. A multi-round request passes through."""
    where = f"the {tool} tool"
    if isinstance(out, str):
        return engine.protect_text(out, where=where)
    if is_dataclass(out) and not isinstance(out, type) and hasattr(out, "text"):
        (text, data), _ = engine.protect([out.text, getattr(out, "data", None)], where=where)
        if text is out.text and data is getattr(out, "data", None):
            return out
        return replace(out, text=text, data=data)
    content = getattr(out, "content", None)
    if isinstance(content, list) and hasattr(out, "model_copy"):
        texts = [getattr(c, "text", None) for c in content]
        structured = getattr(out, "structured_content", None)
        (new_texts, new_structured), _ = engine.protect([texts, structured], where=where)
        new_content = [
            c if t is None or t == old else c.model_copy(update={"text": t})
            for c, t, old in zip(content, new_texts, texts, strict=True)
        ]
        return out.model_copy(update={"content": new_content, "structured_content": new_structured})
    if isinstance(out, dict | list):
        value, _ = engine.protect(out, where=where)
        return value
    return out


_log_engines: tuple[Privacy, ...] = ()
"""The engines whose detectors the log filter applies: one per configuration, workspace
and tenant, since the log is the process's and a record may quote any tenant's value (each
tenant's custom recognizers and deny-lists are its own)."""


def _redact_for_log(text: str) -> str:
    """Every engine looks at the same text and what any of them found is redacted (one
    after the other, a tenant's label over part of another tenant's value hid the rest
    of it from that tenant's detectors: the rest was logged)."""
    text = redact_text(text)
    engines = _log_engines
    if len(engines) < 2:
        return engines[0].redact(text) if engines else text
    found = sorted((sp.start, sp.end, sp.entity) for e in engines for sp in e.scanner.spans(text))
    if not found:
        return text
    merged: list[list[Any]] = []  # [start, end, entity, the longest length behind it]
    for start, end, entity in found:
        last = merged[-1] if merged else None
        if last is None or start >= last[1]:
            merged.append([start, end, entity, end - start])
            continue
        last[1] = max(last[1], end)
        if entity == "SECRET" or (last[2] != "SECRET" and end - start > last[3]):
            last[2], last[3] = entity, end - start
    parts: list[str] = []
    pos = 0
    for start, end, entity, _ in merged:
        parts += (text[pos:start], REDACTED if entity == "SECRET" else f"[{entity}]")
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def _log_filter_factory() -> Callable[..., logging.LogRecord]:
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if record.name.startswith(("codemode", "mcp")):
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a bad format string is the caller's bug
                return record
            clean = _redact_for_log(message)
            if clean != message:
                record.msg, record.args = clean, None
            if record.exc_info and record.exc_info[1] is not None:
                text = logging.Formatter().formatException(record.exc_info)
                record.exc_text = _redact_for_log(text)
        return record

    factory.codemode_privacy = True  # type: ignore[attr-defined]
    return factory


def _install_log_filter() -> None:
    """Log records of codemode and the MCP SDK pass through the net (once per process)."""
    if getattr(logging.getLogRecordFactory(), "codemode_privacy", False):
        return
    logging.setLogRecordFactory(_log_filter_factory())
