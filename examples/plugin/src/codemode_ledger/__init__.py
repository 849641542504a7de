"""codemode-ledger: an example plugin that keeps a ledger of every tool call.

It plugs into three seams (docs/plugins.md):

- a tool-call layer at the ``audit`` stage, outside policy and approval, so it sees every
  call the code makes, refused ones included, with its duration and result size;
- a tool source, so the agent's code reads the ledger like any tool:
  ``tools.ledger.report()`` and ``tools.ledger.recent(n=5)``;
- a workflow step type, ``- ledger: {max_failed: 0}``: the report as the step's output,
  and a failed step when more calls failed than allowed.

The ledger lives in this process's memory, one per workspace: sessions and workflow runs
on the same workspace add to the same ledger.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from codemode import PythonSource
from codemode.errors import CodemodeError
from codemode.plugins import PluginAPI
from codemode.tools.registry import NextCall, ToolCall
from codemode.workflows import StepContext
from codemode.workspace import Workspace

SERVER = "ledger"
_entries: dict[str, list[dict[str, Any]]] = defaultdict(list)


async def record(call: ToolCall, call_next: NextCall) -> Any:
    """The tool-call layer: time the call and note how it ended."""
    if call.server == SERVER:  # reading the ledger is not worth a line in it
        return await call_next(call)
    started, outcome = time.perf_counter(), "error"
    try:
        result = await call_next(call)
        outcome = "ok"
        return result
    finally:
        _entries[call.context.workspace or ""].append(
            {
                "tool": f"{call.server}.{call.tool}",
                "outcome": outcome,
                "ms": round((time.perf_counter() - started) * 1000, 1),
                "bytes": int(call.notes.get("bytes", 0)),
            }
        )


def summarize(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per tool: calls, failures, total milliseconds and bytes returned; busiest first."""
    rows: dict[str, dict[str, Any]] = {}
    for e in entries:
        row = rows.setdefault(e["tool"], {"tool": e["tool"], "calls": 0, "failed": 0,
                                          "ms": 0.0, "bytes": 0})  # fmt: skip
        row["calls"] += 1
        row["failed"] += e["outcome"] != "ok"
        row["ms"] = round(row["ms"] + e["ms"], 1)
        row["bytes"] += e["bytes"]
    return sorted(rows.values(), key=lambda r: -r["calls"])


def sources(workspace: Workspace) -> PythonSource:
    """The ``ledger`` tools of one workspace."""
    entries = _entries[str(workspace.path)]
    source = PythonSource(SERVER)

    def report() -> list[dict[str, Any]]:
        """Per tool: calls, failures, total milliseconds and bytes returned."""
        return summarize(entries)

    def recent(n: int = 5) -> list[dict[str, Any]]:
        """The last ``n`` calls, newest last."""
        return entries[-n:]

    source.add(report, annotations={"readOnlyHint": True})
    source.add(recent, annotations={"readOnlyHint": True})
    return source


class TooManyFailures(CodemodeError):
    """A ``ledger`` workflow step found more failed calls than it allows."""


async def ledger_step(arguments: Mapping[str, Any], ctx: StepContext) -> list[dict[str, Any]]:
    """The workflow step ``- ledger: {max_failed: N}`` (``max_failed`` is optional)."""
    rows = summarize(_entries[ctx.registry.workspace or ""])
    failed = sum(r["failed"] for r in rows)
    limit = arguments.get("max_failed")
    if limit is not None and failed > int(limit):
        raise TooManyFailures(f"{failed} tool calls failed; this step allows {limit}")
    return rows


def setup(api: PluginAPI) -> None:
    """The entry point (``[project.entry-points."codemode.plugins"] ledger = ...``)."""
    api.middleware(record, stage="audit")
    api.tool_source(sources)
    api.step_type("ledger", ledger_step)
