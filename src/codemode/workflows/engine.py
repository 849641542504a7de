"""Running a workflow: steps in order, each journaled as started then finished.

The engine walks the steps with a scope of JSON values (``inputs``, ``run``, each bound
``output``, the loop variable); expressions (``codemode.workflows.expr``) read it. Code,
skill and task steps run in the run's one session, so code steps share globals; bound
outputs are copied into the session's globals before a code step that has not seen
them. Tool steps call the registry directly (the same tool-call chain as code's calls,
with the session's context and the run id).

Replaying a journal (``resume``): a step whose ``done`` event exists returns its recorded
output and does not run; a step that started but never finished runs again only when it
is idempotent (see ``Engine.idempotent``), else the run stops as ``needs_decision`` unless
the caller decided (``rerun``/``skip``) or a person, asked, says to re-run it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from ..errors import CodemodeError, ServerUnavailable, ToolTimeout
from .ask import CONFIRM_SCHEMA, Asker, ask
from .errors import NeedsDecision, StepFailed, Stopped, WorkflowError
from .expr import render
from .journal import Event, Journals
from .model import Retry, Step, Workflow, step_ids

Output = Any
SAFE_KINDS = frozenset({"if", "foreach", "set", "ask", "form"})
"""Kinds that may start again: they decide, ask, or journal their effects as sub-steps."""


class Waiting(Stopped):
    """An ask step found nobody to ask: resume with the answer."""


@dataclass(frozen=True)
class StepEvent:
    """Progress: one step started, finished, failed, was replayed or skipped."""

    kind: str  # start | done | fail | replay | skip | retry | note
    step: str
    label: str = ""
    attempt: int = 1
    output: Any = None
    error: str | None = None


class Checkpointer(Protocol):
    """Saves and restores a session's variables (#20's checkpoints plug in here).

    Without one, a resumed run gets back every bound ``output`` (from the journal) but
    not the other variables earlier code steps defined.
    """

    async def save(self, session: Any, run_id: str, step: str) -> None: ...

    async def restore(self, session: Any, run_id: str) -> bool: ...


@dataclass
class StepContext:
    """What a plugin's step type gets beside its arguments."""

    run_id: str
    step: str
    session: Any
    registry: Any
    scope: Mapping[str, Any]
    asker: Asker | None


@dataclass
class Replay:
    """What a journal says about each step."""

    done: dict[str, Any] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)
    uncertain: set[str] = field(default_factory=set)
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Form fields filled so far, by form step."""

    @classmethod
    def from_events(cls, events: list[Event]) -> Replay:
        r = cls()
        for e in events:
            ev, step = e.get("ev"), e.get("step")
            if not isinstance(step, str):
                continue
            if ev == "start":
                r.started.add(step)
            elif ev == "done":
                r.done[step] = e.get("output")
                r.started.discard(step)
                r.uncertain.discard(step)
            elif ev == "fail":
                r.started.discard(step)
                if e.get("uncertain"):
                    r.uncertain.add(step)
            elif ev == "field":
                r.fields.setdefault(step, {})[str(e.get("name"))] = e.get("value")
        return r

    def unfinished(self) -> set[str]:
        return (self.started | self.uncertain) - set(self.done)


class Engine:
    """One run of one workflow on one session."""

    def __init__(
        self,
        workflow: Workflow,
        *,
        run_id: str,
        session: Any,
        journals: Journals,
        asker: Asker | None = None,
        on_event: Callable[[StepEvent], Awaitable[None] | None] | None = None,
        trusted_servers: frozenset[str] = frozenset(),
        step_types: Mapping[str, Any] | None = None,
        checkpointer: Checkpointer | None = None,
        replay: Replay | None = None,
        rerun: frozenset[str] = frozenset(),
        skip: Mapping[str, Any] | None = None,
        answers: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.workflow = workflow
        self.run_id = run_id
        self.session = session
        self.registry = session.tools
        self.journals = journals
        self.asker = asker
        self.on_event = on_event
        self.trusted = trusted_servers
        self.step_types = dict(step_types or {})
        self.checkpointer = checkpointer
        self.replay = replay or Replay()
        self.done: dict[str, Any] = dict(self.replay.done)
        self.unfinished = frozenset(self.replay.unfinished())
        self.rerun = rerun
        self.skip = dict(skip or {})
        self.answers = {k: dict(v) for k, v in (answers or {}).items()}
        self._synced: dict[str, Any] = {}
        self._code_lock = anyio.Lock()  # values passed in and the code: one unit
        self._restored = replay is None
        self.context = session.context.for_run(run_id)

    # -- the walk ---------------------------------------------------------------------
    async def run(self, scope: dict[str, Any]) -> Any:
        return await self.steps(self.workflow.steps, "", scope)

    async def steps(self, steps: list[Step], prefix: str, scope: dict[str, Any]) -> Output:
        last: Any = None
        for step, sid in zip(steps, step_ids(steps), strict=True):
            last = await self.step(step, f"{prefix}/{sid}" if prefix else sid, scope)
            if step.output:
                scope[step.output] = last
        return last

    async def step(self, step: Step, path: str, scope: dict[str, Any]) -> Output:
        if path in self.done:
            await self._emit(StepEvent("replay", path, _label(step), output=self.done[path]))
            return self.done[path]
        if path in self.unfinished and not await self._may_rerun(step, path):
            if path in self.skip:
                return await self._finish(path, step, self.skip[path], skipped=True)
            if not await self._person_says_rerun(step, path):
                raise NeedsDecision(
                    f"step {path} ({_label(step)}) started but did not finish, and it is not "
                    "known to be idempotent: it may have had its effect. Resume with "
                    f"--rerun {path} to run it again, or --skip {path} [--output JSON] to "
                    "go on without it.",
                    step=path,
                )
        retry = _retry(step.retry)
        attempt = 0
        while True:
            attempt += 1
            await self._journal({"ev": "start", "step": path, "attempt": attempt})
            await self._emit(StepEvent("start", path, _label(step), attempt))
            try:
                if step.timeout is not None:
                    with anyio.fail_after(step.timeout):
                        out = await self.execute(step, path, scope)
                else:
                    out = await self.execute(step, path, scope)
            except (Stopped, NeedsDecision):
                raise
            except (CodemodeError, TimeoutError) as exc:
                uncertain = _uncertain(exc)
                message = _message(exc, step.timeout)
                again = attempt < retry.attempts and _retryable(exc, retry)
                event = {"ev": "fail", "step": path, "error": message, "uncertain": uncertain}
                await self._journal({**event, "retry": again})
                await self._emit(StepEvent("fail", path, _label(step), attempt, error=message))
                if not again:
                    if isinstance(exc, StepFailed):
                        raise
                    raise StepFailed(f"{path}: {message}", step=path, uncertain=uncertain) from exc
                await anyio.sleep(
                    min(retry.max_backoff, retry.backoff * retry.factor ** (attempt - 1))
                )
                continue
            return await self._finish(path, step, out)

    async def _finish(self, path: str, step: Step, out: Any, *, skipped: bool = False) -> Any:
        out = _jsonable(out)
        self.done[path] = out
        await self._journal({"ev": "done", "step": path, "output": out, "skipped": skipped})
        await self._emit(StepEvent("skip" if skipped else "done", path, _label(step), output=out))
        if self.checkpointer is not None and step.kind == "code":
            await self.checkpointer.save(self.session, self.run_id, path)
        return out

    # -- kinds ------------------------------------------------------------------------
    async def execute(self, step: Step, path: str, scope: dict[str, Any]) -> Output:
        kind = step.kind
        if kind == "code":
            assert step.code is not None
            return await self._code(step.code, scope, step.timeout)
        if kind == "tool":
            return await self._tool(step, path, scope)
        if kind == "skill":
            args = render(step.args or {}, scope)
            code = (
                f"skills.invoke({step.skill!r}, **__import__('json').loads({json.dumps(args)!r}))"
            )
            return await self._code(code, {}, step.timeout)
        if kind == "task":
            return await self._task(str(render(step.task, scope)))
        if kind == "ask":
            return await self._ask(path, str(render(step.ask, scope)), step.schema_)
        if kind == "form":
            from .forms import fill_form

            assert step.form is not None
            return await fill_form(self, step.form, path, scope)
        if kind == "set":
            values = render(step.set or {}, scope)
            scope.update(values)
            return values
        if kind == "if":
            test = render(step.if_, scope) if isinstance(step.if_, str) else step.if_
            label, branch = ("then", step.then) if test else ("else", step.else_)
            return await self.steps(branch or [], f"{path}/{label}", scope) if branch else None
        if kind == "foreach":
            return await self._foreach(step, path, scope)
        handler = self.step_types.get(kind)
        if handler is None:
            raise WorkflowError(f"{path}: unknown step type {kind!r} (is its plugin installed?)")
        ctx = StepContext(self.run_id, path, self.session, self.registry, scope, self.asker)
        return await handler(render(step.plugin_args, scope), ctx)

    async def _code(self, code: str, scope: Mapping[str, Any], timeout: float | None) -> Any:
        async with self._code_lock:
            return await self._code_locked(code, scope, timeout)

    async def _code_locked(self, code: str, scope: Mapping[str, Any], timeout: float | None) -> Any:
        if not self._restored:
            self._restored = True
            if self.checkpointer is None or not await self.checkpointer.restore(
                self.session, self.run_id
            ):
                await self._emit(StepEvent(
                    "note", "", error="resumed without a checkpoint: bound outputs are back "
                    "in the session, other variables of earlier code steps are not"))  # fmt: skip
        fresh = {
            k: v for k, v in scope.items() if k.isidentifier() and self._synced.get(k) is not v
        }
        if fresh:
            blob = json.dumps(fresh, ensure_ascii=False, default=str)
            r = await self.session.run(f"globals().update(__import__('json').loads({blob!r}))")
            if r.error is not None:
                raise WorkflowError(
                    f"could not pass the workflow's values to the session: {r.error}"
                )
            self._synced.update(fresh)
        result = await self.session.run(code, timeout=timeout)
        if result.timed_out:
            raise ToolTimeout(f"the code timed out after {timeout} s")
        if result.error is not None:
            err = result.error
            raise StepFailed(f"{err.type}: {err.message}", step="", uncertain=result.state_lost)
        return result.value

    async def _tool(self, step: Step, path: str, scope: Mapping[str, Any]) -> Any:
        assert step.tool is not None
        server, _, tool = step.tool.partition(".")
        args = dict(render(step.args or {}, scope))
        if step.idempotency_key:
            key = (
                f"{self.run_id}:{path}"
                if step.idempotency_key is True
                else render(step.idempotency_key, scope)
            )
            args[step.idempotency_arg] = key
        return await self.registry.call(
            server, tool, args, timeout=step.timeout, context=self.context
        )

    async def _task(self, task: str) -> Any:
        from ..agent import create_agent

        base = self.session.context.workspace
        async with create_agent(session=self.session, base=base) as agent:
            result = await agent.aexecute_task(task)
        out = {"success": result.success, "result": result.result,
               "output": result.output, "error": result.error}  # fmt: skip
        if not result.success:
            raise StepFailed(f"the task did not complete: {result.error}", step="")
        return out

    async def _ask(self, path: str, message: str, schema: Mapping[str, Any] | None) -> Any:
        if path in self.answers:
            return self.answers.pop(path)
        answer = await ask(self.asker, message, schema)
        if answer.action == "accept":
            return answer.content
        if answer.action == "unavailable":
            raise Waiting(f"{path} waits for an answer to: {message}", step=path)
        raise Stopped(f"{path}: the answer was {answer.action!r} to: {message}", step=path)

    async def _foreach(self, step: Step, path: str, scope: dict[str, Any]) -> list[Any]:
        items = render(step.foreach, scope)
        if isinstance(items, dict):
            items = [list(kv) for kv in items.items()]
        if not isinstance(items, list):
            raise WorkflowError(f"{path}: foreach needs a list, got {type(items).__name__}")
        results: list[Any] = [None] * len(items)
        assert step.do is not None
        body = step.do
        queue = iter(enumerate(items))  # shared: `concurrency` workers, not a task per item

        async def worker() -> None:
            for i, item in queue:
                child = {**scope, step.as_: item, "index": i}
                results[i] = await self.steps(body, f"{path}[{i}]", child)

        try:
            async with anyio.create_task_group() as tg:
                for _ in range(min(step.concurrency, len(items))):
                    tg.start_soon(worker)
        except BaseExceptionGroup as group:
            # What an iteration raised (a failed step, a question waiting, a stop), as the
            # run expects it: the group escaped every handler, so a run that failed inside
            # a loop was left "interrupted", its status never written.
            raise _first(group) from group
        return results

    # -- decisions --------------------------------------------------------------------
    async def _may_rerun(self, step: Step, path: str) -> bool:
        return path in self.rerun or await self.idempotent(step)

    async def idempotent(self, step: Step) -> bool:
        """May the step run again after it started but did not finish?

        The workflow's word (``idempotent:``) first; control steps and questions are;
        a tool step with an idempotency key is; a tool whose server is trusted (a tool
        defined in the workspace or in Python, or an MCP server listed in the workflows
        section's ``trusted_servers``) and says readOnlyHint or idempotentHint is.
        """
        if step.idempotent is not None:
            return step.idempotent
        if step.kind in SAFE_KINDS:
            return True
        if step.kind != "tool" or step.tool is None:
            return False
        if step.idempotency_key:
            return True
        server, _, tool = step.tool.partition(".")
        try:
            found = await self.registry.resolve(server, tool)
        except CodemodeError:
            return False
        source = found.server.source
        own = bool(getattr(source, "trusted_annotations", False))
        trusted = own or server in self.trusted or found.spec.server in self.trusted
        hints = dict(found.spec.annotations)
        return trusted and bool(hints.get("readOnlyHint") or hints.get("idempotentHint"))

    async def _person_says_rerun(self, step: Step, path: str) -> bool:
        if self.asker is None:
            return False
        message = (
            f"Step {path} ({_label(step)}) started but did not finish before the run "
            "stopped; it may have had its effect. Run it again?"
        )
        schema = {**CONFIRM_SCHEMA, "properties": {"confirm": {"type": "boolean",
                  "description": "Yes to run the step again"}}}  # fmt: skip
        answer = await ask(self.asker, message, schema)
        return answer.action == "accept" and bool(answer.content.get("confirm"))

    # -- plumbing ----------------------------------------------------------------------
    async def _journal(self, event: Mapping[str, Any]) -> None:
        await self.journals.append(self.run_id, event)

    async def _emit(self, event: StepEvent) -> None:
        if self.on_event is not None:
            got = self.on_event(event)
            if got is not None:
                await got


def _label(step: Step) -> str:
    target = {"tool": step.tool, "skill": step.skill}.get(step.kind)
    return f"{step.kind} {target}" if target else step.kind


def _retry(value: Retry | int | None) -> Retry:
    if value is None:
        return Retry.model_validate({"attempts": 1})
    if isinstance(value, int):
        return Retry.model_validate({"attempts": value})
    return value


def _retryable(exc: BaseException, retry: Retry) -> bool:
    if retry.on is None:
        return True
    names = {cls.__name__ for cls in type(exc).__mro__}
    if isinstance(exc, TimeoutError):
        names.add("Timeout")
    return bool(names & set(retry.on))


def _uncertain(exc: BaseException) -> bool:
    if isinstance(exc, StepFailed):
        return exc.uncertain
    return isinstance(exc, ToolTimeout | ServerUnavailable | TimeoutError)


def _message(exc: BaseException, timeout: float | None) -> str:
    if isinstance(exc, TimeoutError):
        return f"timed out after {timeout} s"
    return f"{type(exc).__name__}: {exc}"


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception of ``group`` that is not itself a group."""
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first


__all__ = ["Checkpointer", "Engine", "Replay", "StepContext", "StepEvent", "Waiting"]
