"""Session: a persistent interpreter for an agent, and the host side of its calls.

A session owns one worker from its executor and routes the worker's calls (tools,
skills, artifacts, state) through ``HostAPI``. It knows no executor by name. Every run
passes through the run chain (``codemode.chain.RUN_STAGES``: hooks added with ``use``)
and carries the session's ``CallContext`` with a run id of its own; the worker's calls
during the run carry it too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .approval.types import Approver, current_approver
from .chain import DEFAULT_STAGE, RUN_STAGES, Chain, RunEvent, RunHook
from .context import CallContext, current_context, session_start
from .errors import CheckpointError, ConfigError, SessionClosed
from .execution.base import Executor, Worker, run_timeout_hold
from .hostapi import HostAPI, call_warnings
from .live import METHOD as OUTPUT_METHOD
from .live import Listener, OnOutput, OutputChunk
from .live import handler as output_handler
from .result import ExecutionResult

if TYPE_CHECKING:
    from .checkpoint.runner import SessionCheckpoints
    from .checkpoint.store import CheckpointInfo, Checkpoints
    from .memory.core import Memory
    from .storage.base import Storage
    from .tools.registry import ToolRegistry
    from .tools.spec import ToolSpec
    from .workspace import Workspace


def _default_executor(workspace: Workspace | None = None) -> Executor:
    from .execution import default_executor

    return default_executor(workspace=workspace)


DEFAULT_OUTPUT_LIMIT = 1_000_000
"""Characters per stream streamed to a listener when the executor does not say its own."""


_SAID_BETWEEN_RUNS = ("the worker was stopped between", "the worker sent a malformed message")
"""Why a worker ended between runs that the next run says: a host-side limit, or a
protocol violation (a second answer to a run: its code forged the first)."""


class Session:
    """Runs agents' code with persistent state.

    ```python
    async with Session(executor=SubprocessExecutor()) as s:
        r = await s.run("x = 41\\nx + 1")
        assert r.value == 42
    ```

    ``checkpoints=`` (``codemode.checkpoint.Checkpoints``) saves the variables after each
    run and restores them into every fresh worker (after a crash, or when the session is
    opened again later): see docs/checkpoints.md.

    ``storage=`` (a ``FileStorage`` or ``RedisStorage``) gives the code ``skills``,
    ``artifacts`` and ``state`` on that storage (closed with the session); ``memory=`` passes
    a ``Memory`` you keep and close yourself. ``tools=`` is the ``ToolRegistry`` its code
    calls (``session.tools``, created on first use, when not given).
    """

    def __init__(
        self,
        executor: Executor | None = None,
        *,
        tools: ToolRegistry | None = None,
        memory: Memory | None = None,
        storage: Storage | None = None,
        default_timeout: float = 60.0,
        context: CallContext | None = None,
        approve: Approver | None = None,
        checkpoints: Checkpoints | None = None,
    ) -> None:
        if storage is not None and memory is not None:
            raise ConfigError(
                "give Session either storage= or memory=, not both "
                "(a Memory already has its storage: memory.storage)"
            )
        owns_memory = False
        if storage is not None:
            from .memory.core import Memory

            memory, owns_memory = Memory(storage), True
        self.executor = executor if executor is not None else _default_executor()
        self.host = HostAPI()
        self.default_timeout = default_timeout
        self.context = (context or CallContext()).for_session()
        """Whose session this is; each run gets a copy with its own ``run_id``."""
        # Calls before the first run (threads or objects a restored checkpoint starts)
        # count in a stand-in run of the session's start, not in none.
        assert self.context.session_id is not None
        self._run_context = dataclasses.replace(
            self.context, after_run=session_start(self.context.session_id)
        )
        self.approve = approve
        """Who says yes or no to calls the policy marks ``ask`` (``codemode.approval``):
        ``approve(ApprovalRequest) -> Approval | bool``; None refuses them. An approver set
        in ``current_approver`` by whoever calls ``run`` (``codemode serve``: the client's
        person, through elicitation) takes precedence for that run."""
        self._run_approver = approve
        self._runs: Chain[RunEvent, ExecutionResult] = Chain("run", RUN_STAGES, self._run)
        self._tools = tools
        self.memory = memory
        if tools is not None:
            tools.install(self.host)
        if memory is not None:
            memory.install(self.host)
        self.host.register(OUTPUT_METHOD, output_handler(self))
        self.output_listener: Listener | None = None
        """The running run's ``on_output`` (``codemode.live`` routes chunks to it)."""
        self._worker: Worker | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._owns_memory = owns_memory
        self._install_deps = False
        self._run_warnings: list[str] = []
        self.checkpoints: Checkpoints | None = None
        """Where this session's variables are saved (``codemode.checkpoint``), or None."""
        self._checkpointing: SessionCheckpoints | None = None
        self._restore_note: str | None = None
        if checkpoints is not None:
            self.use_checkpoints(checkpoints)

    # -- construction from a workspace ------------------------------------------------
    @classmethod
    def from_base(
        cls,
        base: str | os.PathLike[str] | None = None,
        *,
        executor: Executor | None = None,
        **kwargs: Any,
    ) -> Session:
        """A session with the workspace's MCP servers, skills, artifacts, state and deps."""
        from .workspace import Workspace

        return cls.for_workspace(Workspace.open(base), executor=executor, **kwargs)

    @classmethod
    def for_workspace(
        cls,
        workspace: Workspace,
        *,
        executor: Executor | None = None,
        **kwargs: Any,
    ) -> Session:
        """``from_base`` for a workspace that is already open; its capabilities' run hooks
        are added (``codemode.assembly``)."""
        from .assembly import configure_session
        from .memory.capability import MEMORY

        if executor is None:
            executor = _default_executor(workspace)
        memory = kwargs.pop("memory", None)
        owns = memory is None
        if memory is None:
            from .memory import Memory

            memory = Memory.for_workspace(workspace)
        kwargs.setdefault(
            "context",
            CallContext(tenant=workspace.settings.tenant, workspace=str(workspace.path)),
        )
        session = cls(executor, tools=workspace.registry(), memory=memory, **kwargs)
        session._owns_memory = owns
        session._install_deps = workspace.section(MEMORY).install_deps
        configure_session(session, workspace.capabilities, workspace.sections)
        return session

    @property
    def tools(self) -> ToolRegistry:
        if self._tools is None:
            from .tools.registry import ToolRegistry

            self._tools = ToolRegistry()
            self._tools.install(self.host)
        return self._tools

    def register_tool(
        self,
        fn: Callable[..., Any],
        *,
        server: str = "local",
        name: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, Any] | None = None,
    ) -> ToolSpec:
        """Expose a Python callable to the session's code as ``tools.<server>.<name>``
        (``annotations``: MCP tool annotations, e.g. ``{"readOnlyHint": True}``)."""
        return self.tools.register(
            fn, server=server, name=name, description=description, annotations=annotations
        )

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        if self._closed:
            raise SessionClosed("this session is closed; open a new one")
        if self._install_deps and self.memory is not None:
            self._install_deps = False
            await self.memory.prepare(install_deps=True)  # the workspace's configured deps
        if self._worker is None or not self._worker.alive:
            self._worker = await self.executor.start(self._dispatch)
            if self._checkpointing is not None:
                self._restore_note = await self._checkpointing.restore_fresh(self._worker)

    async def __aenter__(self) -> Session:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._worker is not None:
                await self._worker.close()
                self._worker = None
        finally:
            if self._owns_memory and self.memory is not None:
                await self.memory.aclose()

    @property
    def closed(self) -> bool:
        return self._closed

    async def _dispatch(self, method: str, params: dict[str, Any]) -> Any:
        # Each call runs in a task of its own: these context variables are the call's alone.
        call_warnings.set(self._run_warnings)
        current_context.set(self._run_context)
        current_approver.set(self._run_approver)
        worker = self._worker
        run_timeout_hold.set(worker.hold_timeout if worker is not None else None)
        return await self.host.dispatch(method, params)

    # -- running ---------------------------------------------------------------------
    def use(self, hook: RunHook, stage: str = DEFAULT_STAGE) -> None:
        """Add ``hook(event, call_next) -> ExecutionResult`` around every run, at ``stage``
        of ``codemode.chain.RUN_STAGES``; within a stage the first added runs outermost."""
        self._runs.use(hook, stage)

    async def run(
        self, code: str, timeout: float | None = None, *, on_output: OnOutput | None = None
    ) -> ExecutionResult:
        """Run ``code``; errors of the code come back in the result, never raised.

        ``on_output(stream, text)`` (plain or async) gets what the code prints while it
        runs, each chunk before the result; the result still holds all of it.
        """
        if self._closed:
            raise SessionClosed("this session is closed; open a new one")
        if timeout is not None and timeout != timeout:  # NaN: no deadline, no budget cut
            raise ValueError("timeout must be a number of seconds (or None), not NaN")
        event = RunEvent(code, timeout or self.default_timeout, self.context.for_run(), on_output)
        return await self._runs(event)

    async def stream(
        self, code: str, timeout: float | None = None
    ) -> AsyncIterator[OutputChunk | ExecutionResult]:
        """Run ``code``, yielding each ``OutputChunk`` as it is printed, then the result."""
        queue: asyncio.Queue[OutputChunk | ExecutionResult | BaseException] = asyncio.Queue()

        def put(stream: str, text: str) -> None:
            queue.put_nowait(OutputChunk("stderr" if stream == "stderr" else "stdout", text))

        async def runner() -> None:
            try:
                queue.put_nowait(await self.run(code, timeout, on_output=put))
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer
                queue.put_nowait(exc)

        task = asyncio.create_task(runner())
        try:
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if isinstance(item, ExecutionResult):
                    return
        finally:
            if not task.done():
                task.cancel()

    async def _run(self, event: RunEvent) -> ExecutionResult:
        """The innermost step of the run chain: the worker runs the code."""
        async with self._lock:
            if self._worker is not None:
                await self._worker.idle()  # a cancelled run may still be stopping
            restarted = self._worker is not None and not self._worker.alive
            # why it ended, when a host-side limit ended it between runs (a quota)
            why = getattr(self._worker, "exit_info", "") if restarted else ""
            await self.start()
            note, self._restore_note = self._restore_note, None
            assert self._worker is not None
            self._run_warnings = []
            self._run_context = event.context
            self._run_approver = current_approver.get() or self.approve
            if event.on_output is not None:
                limit = getattr(self.executor, "max_output", DEFAULT_OUTPUT_LIMIT)
                self.output_listener = Listener(event.on_output, int(limit))
            try:
                result = await self._worker.run(event.code, event.timeout)
            finally:
                # What the code left running may still call: as the run that just ended.
                self._run_context = dataclasses.replace(
                    self.context, after_run=event.context.run_id
                )
                self._run_approver = self.approve
                self.output_listener = None
            if self._run_warnings:
                result = _with_warning(result, *self._run_warnings)
            if result.state_lost and not self._closed:
                # Start the replacement now, so the next run does not wait for it.
                self._worker = None
                await self.start()
                after, self._restore_note = self._restore_note, None
                if after is not None:
                    result = _with_warning(
                        result, f"the next run starts where the last completed run ended: {after}"
                    )
            elif restarted:
                result = _with_warning(
                    result,
                    f"the worker was restarted before this run: {note}"
                    if note is not None
                    else "the worker was restarted before this run; earlier state was lost",
                )
                if isinstance(why, str) and why.startswith(_SAID_BETWEEN_RUNS):
                    result = _with_warning(result, why)
            elif note is not None:
                result = _with_warning(result, f"this session was resumed: {note}")
            if self._checkpointing is not None and self._worker is not None:
                warning = await self._checkpointing.after_run(self._worker, result)
                if warning is not None:
                    result = _with_warning(result, warning)
            return result

    # -- checkpoints (codemode.checkpoint) --------------------------------------------
    def use_checkpoints(self, checkpoints: Checkpoints) -> None:
        """Save this session's variables to ``checkpoints`` (and restore them from it)."""
        from .checkpoint.runner import SessionCheckpoints

        self.checkpoints = checkpoints
        self._checkpointing = SessionCheckpoints(checkpoints, self.host)

    def _need_checkpoints(self) -> SessionCheckpoints:
        if self._checkpointing is None:
            raise ConfigError(
                "this session has no checkpoint storage: pass checkpoints=Checkpoints(...) "
                "or set checkpoint.auto in the workspace config"
            )
        return self._checkpointing

    async def checkpoint(self) -> CheckpointInfo:
        """Save the variables now; the result lists the names that could not be saved."""
        checkpointing = self._need_checkpoints()
        async with self._lock:
            if self._worker is not None:
                await self._worker.idle()
            await self.start()
            assert self._worker is not None
            return await checkpointing.save(self._worker)

    async def restore(self) -> CheckpointInfo:
        """Replace the variables with those of the stored checkpoint."""
        checkpointing = self._need_checkpoints()
        async with self._lock:
            if self._worker is not None:
                await self._worker.idle()
            await self.start()
            self._restore_note = None
            assert self._worker is not None
            info = await checkpointing.load(self._worker)
            if info is None:
                raise CheckpointError(
                    f"no checkpoint is stored for this session ({checkpointing.store.name})"
                )
            return info

    def interrupt(self, *, force: bool = False, kill_stuck: bool = True) -> bool:
        """Stop the running code as Ctrl-C would: it gets KeyboardInterrupt, its run
        returns what it printed so far, and the session keeps its state. Code that ignores
        the interrupt is killed after the grace period (``kill_stuck``; state is lost), or
        left running until the next call. ``force`` kills the worker at once. Returns
        False when no run is in progress. Safe to call from a signal handler on the
        session's loop."""
        worker = self._worker
        if worker is None:
            return False
        if force:
            kill = getattr(worker, "kill", None)
            if kill is not None:
                kill()
                return True
        stop = getattr(worker, "interrupt", None)
        return bool(stop(kill_stuck=kill_stuck)) if stop is not None else False

    async def reset(self) -> None:
        """Forget all variables, functions and imports of the agent's code."""
        async with self._lock:
            if self._worker is not None:
                await self._worker.idle()
            if self.checkpoints is not None:
                await self.checkpoints.delete()  # a crash must not bring them back
            if self._worker is None or not self._worker.alive:
                await self.start()
                return
            await self._worker.reset()


def _with_warning(result: ExecutionResult, *warnings: str) -> ExecutionResult:
    from dataclasses import replace

    return replace(result, warnings=(*result.warnings, *warnings))


class SyncSession:
    """A blocking facade over ``Session`` for scripts and notebooks."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._runner = asyncio.Runner()
        self._session = Session(*args, **kwargs)
        self._runner.run(self._session.start())

    def run(self, code: str, timeout: float | None = None) -> ExecutionResult:
        return self._runner.run(self._session.run(code, timeout))

    def reset(self) -> None:
        self._runner.run(self._session.reset())

    def checkpoint(self) -> CheckpointInfo:
        return self._runner.run(self._session.checkpoint())

    def restore(self) -> CheckpointInfo:
        return self._runner.run(self._session.restore())

    def close(self) -> None:
        try:
            self._runner.run(self._session.close())
        finally:
            self._runner.close()

    def __enter__(self) -> SyncSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def session(self) -> Session:
        return self._session


__all__ = ["Session", "SyncSession"]
