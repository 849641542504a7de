"""What the audit records: every run, every tool call, every memory write.

The ``audit`` stages sit outside ``privacy`` on both chains, so with privacy on they see
the values as the model saw them (tokens), never the real ones; arguments are not written
at all, only an HMAC of them (keyed: equal arguments can be matched by whoever holds the
key, but a guessable value cannot be confirmed by hashing it). Results are not written
either, only their size. What is written as text (a run's code, a memory record's name)
may hold a real value the code held or wrote: with privacy on it goes through
``codemode.privacy.scrub`` first. The log is chosen by the call's context (its workspace), so one
registry serving several workspaces or tenants writes each to its own log.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..chain import NextRun, RunEvent, RunHook
from ..context import CallContext
from ..errors import BudgetExceeded, ConfigError, ToolDenied, ToolTimeout
from ..memory.events import MemoryWrite
from ..result import ExecutionResult
from ..tools.registry import Middleware, NextCall, ToolCall
from .config import AuditConfig
from .keys import Keys, check_outside, load_keys, state_home
from .log import AuditLog, canonical

log = logging.getLogger(__name__)


def log_path(config: AuditConfig, workspace: str | None) -> Path:
    path = Path(config.path).expanduser()
    if path.is_absolute():
        return path
    if workspace is None:
        raise ConfigError(
            "audit: this call names no workspace, and audit.path is relative; give an "
            "absolute audit.path"
        )
    return Path(workspace) / path


def head_path(config: AuditConfig, log_file: Path) -> Path:
    if config.head_file:
        return Path(config.head_file).expanduser()
    digest = hashlib.sha256(str(log_file.resolve()).encode()).hexdigest()[:16]
    return state_home() / "audit-heads" / f"{digest}.head"


class Trail:
    """The audit of one configuration: its key, and one open log per workspace."""

    def __init__(self, config: AuditConfig, keys: Keys | None = None) -> None:
        from ..workspace import serving_tenants

        self.config = config
        self._keys = keys
        self._missing: ConfigError | None = None
        if keys is None:
            try:
                self._keys = load_keys(config)
            except ConfigError as exc:
                if not serving_tenants():  # each tenant may have its own key: see keys_for
                    raise
                self._missing = exc
        self._logs: dict[str | None, AuditLog] = {}
        self._by_path: dict[Path, AuditLog] = {}
        self._lock = threading.Lock()

    @property
    def keys(self) -> Keys:
        """The key of a workspace served alone (not a tenant's)."""
        if self._keys is None:
            assert self._missing is not None
            raise self._missing
        return self._keys

    def keys_for(self, workspace: str | None) -> Keys:
        """A tenant's of ``serve --tenants``: from its ``env_file``, else the server's derived
        for it (``load_keys``); any other workspace's: the process's."""
        from ..workspace import tenant_workspace

        tenant = tenant_workspace(workspace)
        if tenant is None:
            return self.keys
        path = log_path(self.config, workspace)  # written with the server's key: kept
        return load_keys(self.config, tenant.environment, tenant=tenant.settings.tenant, log=path)

    def log_for(self, workspace: str | None) -> AuditLog:
        got = self._logs.get(workspace)
        if got is not None:
            return got
        with self._lock:
            got = self._logs.get(workspace)
            if got is None:
                got = self._logs[workspace] = self._open(workspace)
            return got

    def _open(self, workspace: str | None) -> AuditLog:
        path = log_path(self.config, workspace)
        head = head_path(self.config, path)
        if workspace is not None:
            check_outside(head, Path(workspace), "head file")
            if self.config.key_file:
                check_outside(Path(self.config.key_file).expanduser(), Path(workspace), "key file")
        keys = self.keys_for(workspace)
        same = self._by_path.get(path.resolve())
        if same is not None and same.keys.chain != keys.chain:
            raise ConfigError(
                f"audit: {path} is the log of another tenant (an absolute audit.path): give "
                "each tenant a log of its own"
            )
        if same is not None:  # one file, one writer in this process: a run's line then
            return same  # writes its tool calls' pending lines first
        opened = self._by_path[path.resolve()] = AuditLog(
            path,
            keys,
            head=head,
            max_bytes=self.config.max_bytes,
            keep=self.config.keep,
            sinks=self.config.sinks,
            batch_lines=self.config.batch_lines,
            batch_seconds=self.config.batch_ms / 1000,
        )
        return opened

    def write(self, ctx: CallContext, record: dict[str, Any], into: AuditLog | None = None) -> None:
        """Append ``record`` for ``ctx`` (to ``into`` when the caller already holds its log);
        a tool call inside a run is deferred to the run's batch (``AuditLog.append``). A
        failed write is logged as an error (what it records has already happened: raising
        would only hide its result)."""
        record["tenant"] = ctx.tenant
        if ctx.session_id:
            record["session"] = ctx.session_id
        if ctx.run_id:
            record["run"] = ctx.run_id
        elif ctx.after_run:
            record["after_run"] = ctx.after_run  # made between runs, by what that one left
        if ctx.client:
            record["client"] = ctx.client
        try:
            defer = ctx.run_id is not None and record["kind"] == "tool"
            (into or self.log_for(ctx.workspace)).append(record, defer=defer)
        except (OSError, ConfigError) as exc:
            log.error("audit: could not record a %s event: %s", record.get("kind"), exc)

    def args_hmac(self, args: Any, into: AuditLog | None = None) -> str:
        """Keyed with the key of the log ``into`` (a tenant's own), else the process's."""
        keys = into.keys if into is not None else self.keys
        return hmac.digest(keys.args, canonical(args), hashlib.sha256).hex()

    def flush(self) -> None:
        """Write every log's pending lines now."""
        for each in list(self._by_path.values()):
            each.flush()

    def close(self) -> None:
        for each in self._by_path.values():
            each.close()
        self._logs.clear()
        self._by_path.clear()


def _scrubbed(text: str, context: CallContext) -> str:
    """``text`` as the model may see it (tokens) when privacy is on for ``context``: names
    and code are written as they are, and may hold a real value the code held or wrote.
    Privacy not loaded in this process means it is off: nothing is imported for it."""
    layers = sys.modules.get("codemode.privacy.layers")
    if layers is None or not text:
        return text
    out = layers.scrub(text, context)
    return out if isinstance(out, str) else text


def _outcome(exc: BaseException | None) -> tuple[str, str | None]:
    if exc is None:
        return "ok", None
    if isinstance(exc, BudgetExceeded):
        return "budget", type(exc).__name__
    if isinstance(exc, ToolDenied):
        return "denied", type(exc).__name__
    if isinstance(exc, ToolTimeout):
        return "timeout", type(exc).__name__
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled", None
    return "error", type(exc).__name__


_NOTED = ("bytes", "policy", "approval", "budget")


def tool_layer(trail: Trail) -> Middleware:
    async def layer(call: ToolCall, call_next: NextCall) -> Any:
        into = trail.log_for(call.context.workspace)  # a misconfigured log stops the call first
        digest = trail.args_hmac(call.args, into)  # before inner layers may rewrite them
        start = time.perf_counter()
        failure: BaseException | None = None
        try:
            return await call_next(call)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            duration = round((time.perf_counter() - start) * 1000, 3)
            record: dict[str, Any] = {
                "kind": "tool",
                "server": call.server,
                "tool": call.tool,
                "args_hmac": digest,
                "duration_ms": duration,
            }
            if failure is None:
                record["outcome"] = "ok"
            else:
                record["outcome"], error = _outcome(failure)
                if error is not None:
                    record["error_type"] = error
                if isinstance(failure, ToolDenied):
                    record["reason"] = failure.reason
            notes = call.notes
            for key in _NOTED:
                if key in notes:
                    record[key] = notes[key]
            trail.write(call.context, record, into)

    return layer


def run_outcome(result: ExecutionResult) -> str:
    if result.error is None:
        return "ok"
    kind = result.error.type
    if kind == "CodeRejected":
        return "rejected"
    if kind == "BudgetExceeded":
        return "budget"
    return "timeout" if result.timed_out else "error"


def run_hook(trail: Trail) -> RunHook:
    config = trail.config

    async def hook(event: RunEvent, call_next: NextRun) -> ExecutionResult:
        code = event.code
        trail.log_for(event.context.workspace)  # a misconfigured log stops the run first
        start = time.perf_counter()
        result: ExecutionResult | None = None
        try:
            result = await call_next(event)
            return result
        finally:
            # As the model may see it: a hash of the raw code would let a reader of the log
            # confirm a guessed real value the code wrote, which the record shows as a token.
            data = _scrubbed(code, event.context).encode("utf-8", "surrogatepass")
            record: dict[str, Any] = {
                "kind": "run",
                "code_sha256": hashlib.sha256(data).hexdigest(),
                "code_bytes": len(data),
                "duration_ms": round((time.perf_counter() - start) * 1000, 3),
                "outcome": "cancelled" if result is None else run_outcome(result),
            }
            if config.record_code:
                cut = data[: config.max_code_bytes]
                try:  # as sent, lone surrogates too (the log escapes them)
                    record["code"] = cut.decode("utf-8", "surrogatepass")
                except UnicodeDecodeError:  # cut inside a character
                    record["code"] = cut.decode(errors="ignore")
                if len(cut) < len(data):
                    record["code_truncated"] = True
            if result is not None and result.error is not None:
                record["error_type"] = result.error.type
            trail.write(event.context, record)

    return hook


def memory_watcher(trail: Trail) -> Any:
    def watch(event: MemoryWrite) -> None:
        record: dict[str, Any] = {
            "kind": "memory",
            "op": event.op,
            "record_kind": event.kind,
            "name": _scrubbed(event.name, event.context),
        }
        if event.size is not None:
            record["size"] = event.size
        trail.write(event.context, record)

    return watch


__all__ = [
    "Trail",
    "head_path",
    "log_path",
    "memory_watcher",
    "run_hook",
    "run_outcome",
    "tool_layer",
]
