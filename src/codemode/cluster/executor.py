"""``RayExecutor``: each session's worker in a Ray actor on some node of a cluster.

The host (this process: ``codemode serve``, the SDK) keeps everything that holds
credentials: the tool registry, upstream MCP connections, the memory's storage. A
session's actor (:mod:`.actor`) starts the same sandboxed worker on its node and relays
the worker protocol: a run is one exchange whose answer is the result, or the calls the
code made; the host serves those calls here and sends each reply back. The exchange goes
over the session's direct link (:mod:`.link`) when it is up, else as actor calls. The
run's limits are enforced on the node by the node's own ``SandboxExecutor``.

Placement: an actor reserves ``num_cpus`` (0.01 by default: Ray's default of one CPU
per actor would fit one session per core) and ``memory`` (the worker's memory limit plus
the actor's own process), plus any custom ``resources`` that mark the nodes meant for
sessions. Actors are owned by this process (not detached): if the host dies, Ray ends
them. Their names are unguessable and their namespace names the tenant.

Ray has no authentication by default: run the cluster on a private network (or with
Ray's token authentication), as docs/ray.md says.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import ExecutorError
from ..execution.base import CallHandler
from ..execution.limits import Limits
from ..hostapi import error_to_wire
from ..result import ErrorInfo, ExecutionResult
from .actor import (
    CALL,
    DONE,
    FAILED,
    actor_class,
    from_result_fields,
    pack,
    unpack,
)
from .config import RayConfig
from .join import EXTRA_HINT as EXTRA_HINT
from .join import _ray, _why, check_versions, connect
from .link import HOLD, INTERRUPT, POLL, REPLY, RUN, LinkBroken, LinkFailed, LinkKeeper

if TYPE_CHECKING:
    from ..workspace import Workspace

log = logging.getLogger("codemode.cluster")

ACTOR_OVERHEAD_MB = 150
"""What the actor's own Ray worker process holds, beside the sandboxed worker."""

STOP_SLACK = 30.0
"""Seconds past the node's interrupt grace that a cancelled run may take to end there."""
CANCELLED_REPLY = {"type": "HostError", "message": "the run was cancelled"}


class RayExecutor:
    """Starts each session's worker in its own actor on a Ray cluster."""

    def __init__(
        self,
        config: RayConfig | None = None,
        *,
        tenant: str = "default",
        limits: Limits | None = None,
        max_output: int = 1_000_000,
        interrupt_grace: float = 1.0,
        worker_start_timeout: float = 15.0,
        env: dict[str, str] | None = None,
        runtime_env: dict[str, Any] | None = None,
        pool_size: int | None = None,
    ) -> None:
        self.config = config or RayConfig()
        self.tenant = tenant
        self.limits = limits or Limits()
        self.max_output = max_output
        self.interrupt_grace = interrupt_grace
        self.worker_start_timeout = worker_start_timeout
        self.env = dict(env or {})
        self.runtime_env = runtime_env
        self.pool_size = 1 if pool_size is None else pool_size
        """Actors kept placed with their worker started, so a session starts at once."""
        self._actor_cls: Any = None
        self._ready: list[tuple[Any, dict[str, Any]]] = []
        self._filling = 0
        self._tasks: set[asyncio.Task[None]] = set()

    @classmethod
    def for_workspace(cls, workspace: Workspace | None = None, **options: Any) -> RayExecutor:
        """An executor for a codemode workspace: its ``ray`` section, tenant and quotas.

        The workspace's files and deps directories are host paths: the node does not
        have them, so each worker gets a private scratch ``/workspace`` on its node.
        """
        from .capability import RAY

        if workspace is None and "config" not in options:
            # No workspace (e.g. `codemode run --no-tools`): the environment still applies.
            from ..config.schema import load_config

            loaded = load_config(None, sections=[RAY.section])
            options["config"] = loaded.section(RAY.name, RayConfig)
        if workspace is not None:
            options.setdefault("config", workspace.section(RAY))
            options.setdefault("tenant", workspace.settings.tenant)
            settings = workspace.settings
            options.setdefault(
                "limits",
                Limits(
                    workspace_mb=settings.workspace_quota_mb or None,
                    workspace_files=settings.workspace_quota_files or None,
                ),
            )
        for host_only in ("cwd", "deps_dir"):
            options.pop(host_only, None)
        return cls(**options)

    @property
    def namespace(self) -> str:
        """Actors of one tenant share a namespace (listing, cleanup); names are random."""
        return f"{self.config.namespace}-{self.tenant}"

    def memory_bytes(self) -> int:
        mb = self.config.memory_mb
        if not mb:
            mb = (self.limits.memory_mb or 1024) + ACTOR_OVERHEAD_MB
        return mb << 20

    def worker_options(self) -> dict[str, Any]:
        """How the actor starts its worker (the node's SandboxExecutor's arguments)."""
        options: dict[str, Any] = {
            "max_output": self.max_output,
            "interrupt_grace": self.interrupt_grace,
            "start_timeout": self.worker_start_timeout,
            "env": self.env,
        }
        if self.config.worker == "sandbox":
            options["limits"] = self.limits
        else:
            options["memory_limit_mb"] = self.limits.memory_mb
        return options

    async def warm(self) -> None:
        """Join the cluster now, so a wrong address is reported at start, and fill the
        pool of ready actors (a failure there is reported by the next ``start``)."""
        await asyncio.to_thread(connect, self.config)
        with contextlib.suppress(ExecutorError):
            await self._refill()

    async def start(self, handler: CallHandler) -> RayWorker:
        handle: Any = None
        info: dict[str, Any] = {}
        while self._ready and handle is None:
            handle, info = self._ready.pop(0)
            try:  # a ready actor may have died with its node since it started
                await self._call(handle.pid.remote(), "answer", self._deadline())
            except ExecutorError:
                with contextlib.suppress(Exception):
                    _ray().kill(handle, no_restart=True)
                handle = None
        if handle is None:
            handle, info = await self._launch()
        task = asyncio.get_running_loop().create_task(self._refill())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return RayWorker(self, handle, handler, info)

    async def _refill(self) -> None:
        while len(self._ready) + self._filling < self.pool_size:
            self._filling += 1
            try:
                self._ready.append(await self._launch())
            except ExecutorError:
                return  # the next start() launches (and reports) on its own
            finally:
                self._filling -= 1

    def close(self) -> None:
        """End the actors kept ready (the sessions' own actors end with their sessions)."""
        ready, self._ready = self._ready, []
        for task in self._tasks:
            task.cancel()
        if ready:
            ray = _ray()
            for handle, _ in ready:
                with contextlib.suppress(Exception):
                    ray.kill(handle, no_restart=True)

    async def _launch(self, *, detached: bool = False) -> tuple[Any, dict[str, Any]]:
        """Place an actor, check its versions, start its worker (retrying a dead node).

        ``detached``: the actor outlives this process (shared sessions: any replica may
        find it by name); it ends itself once idle (``SessionActor.expire_after``)."""
        ray = _ray()
        if not ray.is_initialized():
            await asyncio.to_thread(connect, self.config)
        if self._actor_cls is None:
            self._actor_cls = actor_class(ray)
        options: dict[str, Any] = {
            "namespace": self.namespace,
            "num_cpus": self.config.num_cpus,
            "memory": self.memory_bytes(),
            "max_restarts": 0,
            # Per-call task events cost each run (recorded, buffered, sent to the GCS).
            "enable_task_events": self.config.task_events,
        }
        if detached:
            options["lifetime"] = "detached"
        if self.config.spread:
            options["scheduling_strategy"] = "SPREAD"
        if self.config.resources:
            options["resources"] = dict(self.config.resources)
        if self.runtime_env is not None:
            options["runtime_env"] = self.runtime_env
        loop = asyncio.get_running_loop()
        deadline = self._deadline()
        while True:
            # A fresh name per attempt: a dead actor's name may not be free yet.
            options["name"] = name = secrets.token_urlsafe(24)
            handle = self._actor_cls.options(**options).remote(
                self.config.worker, self.worker_options()
            )
            try:
                info = await self._call(handle.hello.remote(), "get placed on a node", deadline)
                check_versions(info)
                info["pid"] = await self._call(handle.start.remote(), "start its worker", deadline)
                info["name"] = name
            except _NodeLost:
                with contextlib.suppress(Exception):
                    ray.kill(handle, no_restart=True)
                if loop.time() < deadline - 1:
                    continue  # placed on a node that died before Ray noticed: try again
                raise
            except BaseException:
                with contextlib.suppress(Exception):
                    ray.kill(handle, no_restart=True)
                raise
            return handle, info

    def _deadline(self) -> float:
        return asyncio.get_running_loop().time() + self.config.start_timeout

    async def attach(self, name: str, handler: CallHandler) -> RayWorker | None:
        """The worker of the live detached actor ``name`` (another replica may have
        started it), or None when no such actor lives any more."""
        ray = _ray()
        if not ray.is_initialized():
            await asyncio.to_thread(connect, self.config)
        try:
            handle = await asyncio.to_thread(ray.get_actor, name, self.namespace)
        except ValueError:
            return None
        try:
            info = await self._call(handle.hello.remote(), "answer", self._deadline())
            info["pid"] = await self._call(handle.pid.remote(), "answer", self._deadline())
        except ExecutorError:
            return None
        if not info["pid"]:
            return None  # its worker is gone (the actor is ending)
        info["name"] = name
        return RayWorker(self, handle, handler, info, detached=True)

    async def _call(self, ref: Any, what: str, deadline: float) -> Any:
        ray = _ray()
        timeout = self.config.start_timeout
        try:
            left = max(deadline - asyncio.get_running_loop().time(), 0.01)
            return await asyncio.wait_for(ref, left)
        except TimeoutError:
            raise ExecutorError(
                f"the session's Ray actor did not {what} within {timeout:g} s: no node may "
                f"have {self.memory_bytes() >> 20} MB of memory, {self.config.num_cpus} CPU"
                + (f" and resources {self.config.resources}" if self.config.resources else "")
                + " free (see `ray status`); add nodes, or lower ray.memory_mb"
            ) from None
        except ray.exceptions.RayActorError as exc:
            error = _NodeLost if not exc.actor_init_failed else ExecutorError
            raise error(f"the session's Ray actor could not {what}: {_why(exc)}") from exc
        except ray.exceptions.RayError as exc:
            raise ExecutorError(f"the session's Ray actor could not {what}: {_why(exc)}") from exc


class _NodeLost(ExecutorError):
    """The actor died with its node (not of its own error) while starting: worth a retry."""


class RayWorker:
    """Host side of one session's actor: runs relay calls; calls come back to be served."""

    def __init__(
        self,
        executor: RayExecutor,
        handle: Any,
        handler: CallHandler,
        info: dict[str, Any],
        *,
        detached: bool = False,
    ) -> None:
        self._ex = executor
        self.detached = detached
        """A shared session's actor: closing this worker leaves it to the next replica."""
        self._handle = handle
        self._handler = handler
        self.info = info
        self._dead = False
        self._running = False
        self._calls: set[asyncio.Task[None]] = set()
        self._stopping: asyncio.Task[None] | None = None
        """A cancelled run's end on its node, awaited by ``idle``."""
        self._idle: asyncio.TimerHandle | None = None
        self._arm_idle()
        self._link = LinkKeeper(self._where) if executor.config.direct else None
        self._replies: list[tuple[Any, bool, Any]] = []
        """Replies of the current run sent over the link: sent again over Ray if it breaks."""
        self._run_id = b""
        self._hold: tuple[bytes, int, int] | None = None
        """The current run's holds as last sent ``(run_id, seq, depth)``: sent again over
        Ray if the link breaks (it may have lost it)."""

    async def _where(self) -> tuple[str, int, bytes]:
        host, port, secret = await self._handle.link.remote()
        return str(host), int(port), bytes(secret)

    @property
    def alive(self) -> bool:
        return not self._dead

    @property
    def linked(self) -> bool:
        """Runs go over the direct link now (else over Ray calls)."""
        return self._link is not None and self._link.up is not None

    @property
    def node(self) -> str:
        """The Ray node id the session lives on."""
        return str(self.info.get("node", ""))

    @property
    def pid(self) -> int:
        """The worker's pid on its node."""
        return int(self.info.get("pid") or 0)

    # -- runs ------------------------------------------------------------------------
    async def run(self, code: str, timeout: float) -> ExecutionResult:
        await self.idle()
        start = time.perf_counter()
        if self._dead:
            return _lost("the session's Ray actor is gone", start)
        self._disarm_idle()
        self._running = True
        ray = _ray()
        request = (secrets.token_bytes(8), code, timeout)
        ack = 0  # the last event batch received: none yet, the run may not have started
        self._replies.clear()
        self._run_id, self._hold = request[0], None
        if self._link is not None:  # opened by the first run (a worker may never run)
            self._link.want()
        try:
            while True:
                seq, events = await self._next(request, ack)
                if seq <= ack:
                    continue  # sent again after a broken link, but it had come
                ack = seq
                for event in events:
                    op = event[0]
                    if op == CALL:
                        self._spawn_serve(event)
                    elif op == DONE:
                        ms = (time.perf_counter() - start) * 1000
                        result = from_result_fields(event[1], ms)
                        if result.state_lost:  # the node's worker died: so does this actor
                            self._end()
                        return result
                    elif op == FAILED:
                        self._end()
                        return _lost(f"the run failed on its node: {event[1]}", start)
        except asyncio.CancelledError:
            # The caller is gone: stop the code on its node as a timeout would (interrupt,
            # then kill after the node's grace), without making the caller wait for it.
            self._stop_cancelled(request, ack)
            raise
        except ray.exceptions.RayActorError as exc:
            self._end()
            return _lost(f"the Ray node running this session was lost ({_why(exc)})", start)
        except (ray.exceptions.RayError, LinkFailed) as exc:
            self._end()
            return _lost(f"the session's Ray actor failed ({_why(exc)})", start)
        finally:
            self._running = False
            self._replies.clear()
            for task in self._calls:
                task.cancel()
            self._arm_idle()

    async def _next(self, request: tuple[bytes, str, float], ack: int) -> Any:
        """The event batch of the run ``request`` after ``ack``: over the link when it is
        up, else (or when it breaks now) over Ray. Until a first batch came (``ack`` 0)
        the run itself is sent: the node starts it once, whichever way it came."""
        link = self._link.up if self._link is not None else None
        if link is not None:
            try:
                if not ack:
                    return await link.ask(RUN, (*request, ack))
                return await link.ask(POLL, (request[0], ack))
            except LinkBroken:
                self._resend()
        if not ack:
            return unpack(await self._handle.run.remote(pack((*request, ack))))
        return unpack(await self._handle.poll.remote(pack((request[0], ack))))

    def _resend(self) -> None:
        """What went over a link that broke, sent again over Ray (each counts once)."""
        for answer in self._replies:
            self._handle.reply.remote(pack(answer))
        if self._hold is not None:
            self._handle.hold.remote(self._hold)

    def _spawn_serve(self, event: tuple[Any, ...]) -> None:
        task = asyncio.get_running_loop().create_task(self._serve(event))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    def _tell(self, op: str, arg: Any) -> bool:
        """Send ``op`` over the link if it is up (True), else leave it to the caller."""
        link = self._link.up if self._link is not None else None
        if link is None:
            return False
        try:
            link.tell(op, arg)
        except LinkBroken:
            return False
        return True

    def _stop_cancelled(self, request: tuple[bytes, str, float], ack: int) -> None:
        """Interrupt the node's run and follow it to its end in the background over Ray
        (the link, cancelled mid-read, is closed): the batches after ``ack`` are read,
        never dropped, so the actor's event queue is empty again before the next run."""
        if self._dead:
            return
        self._handle.interrupt.remote(request[0], True)
        self._resend()  # the link may have lost them
        task = asyncio.get_running_loop().create_task(self._drain(request, ack))
        self._stopping = task

    async def _drain(self, request: tuple[bytes, str, float], ack: int) -> None:
        ray = _ray()
        # The node kills a run that ignores the interrupt after its grace; past that (and
        # a relay's worth of slack) the actor itself is given up, with the state.
        bound = self._ex.interrupt_grace + STOP_SLACK
        try:
            async with asyncio.timeout(bound):
                while True:
                    if not ack:  # the run may not have reached the node yet
                        ref = self._handle.run.remote(pack((*request, ack)))
                    else:
                        ref = self._handle.poll.remote(pack((request[0], ack)))
                    seq, events = unpack(await ref)
                    if seq <= ack:
                        continue
                    ack = seq
                    for event in events:
                        op = event[0]
                        if op == CALL:  # nobody waits for an answer any more
                            self._refuse(event[1])
                        elif op == FAILED or (
                            op == DONE and from_result_fields(event[1], 0).state_lost
                        ):
                            self._end()
                            return
                        elif op == DONE:
                            return
        except (TimeoutError, ray.exceptions.RayError):
            self._end()

    def _refuse(self, cid: Any) -> None:
        with contextlib.suppress(Exception):
            self._handle.reply.remote(pack((cid, False, CANCELLED_REPLY)))

    async def idle(self) -> None:
        """Wait until a cancelled run has ended on its node (bounded: see ``_drain``)."""
        task = self._stopping
        if task is not None:
            await asyncio.wait([task])
            self._stopping = None

    async def _serve(self, event: tuple[Any, ...]) -> None:
        ray = _ray()
        _, cid, method, params = event
        try:
            value = await self._handler(str(method), params or {})
            ok = True
        except asyncio.CancelledError:
            self._refuse(cid)  # the run was cancelled: the code must not wait
            raise
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the agent's code
            ok, value = False, error_to_wire(exc)
        answer = (cid, ok, value)
        if self._tell(REPLY, answer):
            self._replies.append(answer)
            return
        with contextlib.suppress(ray.exceptions.RayError):
            await self._handle.reply.remote(pack(answer))

    @contextmanager
    def hold_timeout(self) -> Iterator[None]:
        if not self._running or self._dead:
            yield
            return
        # The state is sent, numbered, not a step: the link's message and Ray's may
        # arrive in either order, or both (``_resend``); the actor takes the latest once.
        self._send_hold(+1)
        try:
            yield
        finally:
            if not self._dead:
                self._send_hold(-1)

    def _send_hold(self, step: int) -> None:
        seq, depth = (0, 0) if self._hold is None else self._hold[1:]
        self._hold = state = (self._run_id, seq + 1, max(0, depth + step))
        if not self._tell(HOLD, state):
            self._handle.hold.remote(state)

    def interrupt(self, *, kill_stuck: bool = True) -> bool:
        """Ctrl-C for the code on the node; the node's grace period and kill apply."""
        if not self._running or self._dead:
            return False
        if not self._tell(INTERRUPT, (self._run_id, kill_stuck)):
            self._handle.interrupt.remote(self._run_id, kill_stuck)
        return True

    def kill(self) -> None:
        """End the actor (and with it the worker) at once."""
        self._end()

    async def reset(self) -> None:
        ray = _ray()
        try:
            await asyncio.wait_for(self._handle.reset.remote(), 15)
        except (TimeoutError, ray.exceptions.RayError) as exc:
            self._end()
            raise ExecutorError(f"the session's Ray actor did not reset: {exc}") from None

    async def close(self) -> None:
        if self._stopping is not None:
            self._stopping.cancel()
        if self._dead:
            return
        if self.detached:  # the session lives on: only this host lets go of it
            self._dead = True
            self._disarm_idle()
            if self._link is not None:
                self._link.close()
            return
        if self._link is not None:
            self._link.close()
        ray = _ray()
        with contextlib.suppress(TimeoutError, ray.exceptions.RayError):
            await asyncio.wait_for(self._handle.close.remote(), 5)
        self._end()

    # -- endings -----------------------------------------------------------------------
    def _end(self) -> None:
        if self._dead:
            return
        self._dead = True
        self._disarm_idle()
        if self._link is not None:
            self._link.close()
        with contextlib.suppress(Exception):
            _ray().kill(self._handle, no_restart=True)

    def _arm_idle(self) -> None:
        idle = self._ex.config.idle_timeout
        if idle and not self._dead and not self.detached:  # a detached actor times itself
            self._idle = asyncio.get_running_loop().call_later(idle, self._end)

    def _disarm_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None


def _lost(why: str, start: float) -> ExecutionResult:
    return ExecutionResult(
        error=ErrorInfo(
            "WorkerCrashed",
            f"{why}; the session's state was lost and the next run starts a fresh worker",
        ),
        state_lost=True,
        duration_ms=(time.perf_counter() - start) * 1000,
    )
