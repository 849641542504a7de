"""Running, resuming and listing workflow runs: the SDK surface (``run_workflow``...).

Every surface (``codemode workflow``, ``python -m codemode.workflows.executor``, the MCP
tool ``run_workflow``, these functions) comes through here: one session per run, opened
on the workspace, journaled in the workspace's storage (``journal``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config.files import Document, load_document, validate_document
from ..errors import ConfigError
from .ask import Asker
from .engine import Checkpointer, Engine, Replay, StepEvent, Waiting
from .errors import NeedsDecision, StepFailed, Stopped, WorkflowError
from .expr import expressions, parse, render
from .journal import FileJournals, Journals, StorageJournals
from .model import Step, Workflow, step_ids
from .steps import BUILTIN_KINDS

if TYPE_CHECKING:
    from ..session import Session
    from ..workspace import Workspace

WorkflowSource = str | PathLike[str] | Mapping[str, Any] | Workflow
OnEvent = Callable[[StepEvent], Awaitable[None] | None]


@dataclass
class RunResult:
    """How a run ended: ``status`` is succeeded, failed, stopped (a person declined),
    waiting (nobody to ask), or needs_decision (resume needs ``rerun``/``skip``)."""

    run_id: str
    status: str
    result: Any = None
    outputs: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    step: str | None = None
    """The step the run stopped at, when it did not succeed."""
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "result": self.result,
            "outputs": self.outputs,
            "error": self.error,
            "step": self.step,
            "duration_s": round(self.duration_s, 3),
        }


# -- loading and checking -------------------------------------------------------------------


def load_workflow(source: WorkflowSource) -> tuple[Workflow, Document | None]:
    """The workflow and its document; ConfigError naming file, line and field."""
    if isinstance(source, Workflow):
        return source, None
    if isinstance(source, Mapping):
        doc = Document(Path("<workflow>"), dict(source), json.dumps(dict(source)))
    else:
        doc = load_document(Path(source))
    workflow = validate_document(doc, Workflow)
    check_workflow(workflow, doc)
    return workflow, doc


def check_workflow(workflow: Workflow, doc: Document | None = None) -> None:
    """What the schema cannot say: expressions parse, step types exist."""
    from ..plugins import step_types

    known = step_types()
    problems: list[str] = []

    def where(keys: list[str | int]) -> str:
        return doc.where(keys) if doc is not None else "workflow"

    def walk(steps: list[Step], keys: list[str | int]) -> None:
        for i, (step, sid) in enumerate(zip(steps, step_ids(steps), strict=True)):
            here = [*keys, i]
            if step.kind not in BUILTIN_KINDS and step.kind not in known:
                problems.append(f"{where(here)}: step {sid}: unknown step type {step.kind!r}")
            raw = step.model_dump(by_alias=True, exclude={"then", "else_", "do", "code"})
            for text in expressions(raw):
                try:
                    parse(text)
                except WorkflowError as exc:
                    problems.append(f"{where(here)}: step {sid}: {exc}")
            for label, children in step.children():
                walk(children, [*here, label])

    walk(workflow.steps, ["steps"])
    for text in expressions(workflow.result):
        try:
            parse(text)
        except WorkflowError as exc:
            problems.append(f"{where(['result'])}: result: {exc}")
    if problems:
        raise ConfigError("\n".join(problems))


def schema() -> dict[str, Any]:
    """The published JSON Schema of workflow files."""
    out = Workflow.model_json_schema(by_alias=True)
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out["$id"] = "https://codemode.dev/schemas/workflow.schema.json"
    return out


# -- the workspace's journals --------------------------------------------------------------


def journals_for(workspace: Workspace, storage: Any = None) -> Journals:
    from .capability import WORKFLOWS

    config = workspace.section(WORKFLOWS)
    if workspace.settings.storage == "file" or storage is None:
        return FileJournals(
            workspace.path / "workflows" / "runs",
            fsync=config.fsync,
            max_bytes=int(config.max_journal_mb * (1 << 20)),
        )
    return StorageJournals(storage)


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def _inputs(workflow: Workflow, given: Mapping[str, Any] | None) -> dict[str, Any]:
    given = dict(given or {})
    unknown = sorted(set(given) - set(workflow.inputs))
    if unknown:
        raise ConfigError(f"unknown inputs: {', '.join(unknown)} (declared: "
                          f"{', '.join(workflow.inputs) or 'none'})")  # fmt: skip
    out: dict[str, Any] = {}
    for name, spec in workflow.inputs.items():
        if name in given:
            out[name] = given[name]
        elif spec.is_required:
            raise ConfigError(f"input {name!r} is required")
        else:
            out[name] = spec.default
    return out


# -- running --------------------------------------------------------------------------------


async def arun_workflow(
    workflow: WorkflowSource,
    *,
    inputs: Mapping[str, Any] | None = None,
    base: str | PathLike[str] | None = None,
    workspace: Workspace | None = None,
    session: Session | None = None,
    executor: Any = None,
    asker: Asker | None = None,
    on_event: OnEvent | None = None,
    run_id: str | None = None,
    checkpointer: Checkpointer | None = None,
) -> RunResult:
    """Run ``workflow`` (a file, a mapping or a ``Workflow``) to its end.

    One session per run: opened on the workspace (``base``; its executor unless
    ``executor`` is given), or ``session`` when the caller lends one.
    """
    wf, doc = load_workflow(workflow)
    ws = workspace or _open(base)
    values = _inputs(wf, inputs)
    run_id = run_id or new_run_id()
    source = str(doc.path) if doc is not None else "<workflow>"
    head = {"ev": "run", "run_id": run_id, "name": wf.name, "source": source,
            "workflow": wf.model_dump(mode="json", by_alias=True, exclude_unset=True),
            "digest": _digest(wf), "inputs": values}  # fmt: skip
    return await _drive(ws, wf, run_id, values, head, None, session, executor, asker,
                        on_event, checkpointer, {})  # fmt: skip


async def aresume_workflow(
    run_id: str,
    *,
    base: str | PathLike[str] | None = None,
    workspace: Workspace | None = None,
    session: Session | None = None,
    executor: Any = None,
    asker: Asker | None = None,
    on_event: OnEvent | None = None,
    rerun: tuple[str, ...] | list[str] = (),
    skip: Mapping[str, Any] | None = None,
    answers: Mapping[str, Mapping[str, Any]] | None = None,
    checkpointer: Checkpointer | None = None,
) -> RunResult:
    """Continue run ``run_id`` from its first unfinished step (finished steps never run
    again; see ``Engine`` for steps that started but did not finish)."""
    ws = workspace or _open(base)
    journals = journals_for(ws, _storage(ws))
    events = await journals.read(run_id)
    head = next((e for e in events if e.get("ev") == "run"), None)
    if head is None:
        raise WorkflowError(f"run {run_id!r} has no start record: it cannot be resumed")
    last = next((e for e in reversed(events) if e.get("ev") == "status"), None)
    if last is not None and last.get("status") == "succeeded":
        return RunResult(run_id, "succeeded", last.get("result"), last.get("outputs") or {})
    wf = Workflow.model_validate(head["workflow"])
    replay = Replay.from_events(events)
    extra = {"rerun": frozenset(rerun), "skip": dict(skip or {}), "answers": dict(answers or {})}
    return await _drive(ws, wf, run_id, dict(head.get("inputs") or {}), None, replay, session,
                        executor, asker, on_event, checkpointer, extra)  # fmt: skip


async def _drive(
    ws: Workspace,
    wf: Workflow,
    run_id: str,
    inputs: dict[str, Any],
    head: dict[str, Any] | None,
    replay: Replay | None,
    session: Session | None,
    executor: Any,
    asker: Asker | None,
    on_event: OnEvent | None,
    checkpointer: Checkpointer | None,
    extra: dict[str, Any],
) -> RunResult:
    from ..plugins import step_types
    from ..session import Session
    from .capability import WORKFLOWS

    started = time.monotonic()
    own = session is None
    if session is None:
        session = Session.for_workspace(ws, executor=executor)
    journals = journals_for(ws, session.memory.storage if session.memory else None)
    try:
        if head is not None:
            await journals.append(run_id, head)
        else:
            await journals.append(run_id, {"ev": "resume"})
        config = ws.section(WORKFLOWS)
        engine = Engine(
            wf, run_id=run_id, session=session, journals=journals, asker=asker,
            on_event=on_event, trusted_servers=frozenset(config.trusted_servers),
            step_types=step_types(), checkpointer=checkpointer, replay=replay, **extra,
        )  # fmt: skip
        scope: dict[str, Any] = {"inputs": inputs, "run": {"id": run_id, "name": wf.name}}
        result = RunResult(run_id, "running")
        try:
            last = await engine.run(scope)
            value = render(wf.result, scope) if wf.result is not None else last
            result.status, result.result = "succeeded", value
        except Waiting as exc:
            result.status, result.error, result.step = "waiting", str(exc), exc.step
        except Stopped as exc:
            result.status, result.error, result.step = "stopped", str(exc), exc.step
        except NeedsDecision as exc:
            result.status, result.error, result.step = "needs_decision", str(exc), exc.step
        except StepFailed as exc:
            result.status, result.error, result.step = "failed", str(exc), exc.step
        except WorkflowError as exc:
            result.status, result.error = "failed", str(exc)
        result.outputs = {k: v for k, v in scope.items() if k not in ("inputs", "run")}
        result.duration_s = time.monotonic() - started
        await journals.append(run_id, {"ev": "status", **result.to_dict()})
        return result
    finally:
        close = getattr(journals, "close", None)
        if close is not None:
            close(run_id)
        if own:
            await session.close()


async def list_runs(
    *, base: str | PathLike[str] | None = None, workspace: Workspace | None = None
) -> list[dict[str, Any]]:
    """Each run: id, workflow name, status, the step it stopped at, when it started."""
    ws = workspace or _open(base)
    journals = journals_for(ws, _storage(ws))
    out = []
    for run_id in await journals.runs():
        events = await journals.read(run_id)
        head = next((e for e in events if e.get("ev") == "run"), {})
        last = next((e for e in reversed(events) if e.get("ev") == "status"), None)
        status = last.get("status") if last else "interrupted"
        done = sum(1 for e in events if e.get("ev") == "done")
        out.append({"run_id": run_id, "name": head.get("name"), "status": status,
                    "step": last.get("step") if last else None, "steps_done": done,
                    "started": head.get("t")})  # fmt: skip
    return out


def _open(base: str | PathLike[str] | None) -> Workspace:
    from ..workspace import Workspace

    return Workspace.open(base)


def _storage(ws: Workspace) -> Any:
    if ws.settings.storage == "file":
        return None
    from ..memory import Memory

    return Memory.for_workspace(ws).storage


def _digest(wf: Workflow) -> str:
    raw = json.dumps(wf.model_dump(mode="json", by_alias=True), sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


# -- blocking twins -------------------------------------------------------------------------


def run_workflow(workflow: WorkflowSource, **options: Any) -> RunResult:
    """Blocking :func:`arun_workflow` (for scripts; inside async code await the other)."""
    return asyncio.run(arun_workflow(workflow, **options))


def resume_workflow(run_id: str, **options: Any) -> RunResult:
    """Blocking :func:`aresume_workflow`."""
    return asyncio.run(aresume_workflow(run_id, **options))


__all__ = [
    "RunResult",
    "aresume_workflow",
    "arun_workflow",
    "check_workflow",
    "journals_for",
    "list_runs",
    "load_workflow",
    "new_run_id",
    "resume_workflow",
    "run_workflow",
    "schema",
]
