"""The node side of a Ray session: one actor that holds one sandboxed worker.

The actor runs in a Ray worker process on whichever node Ray placed it. It starts the
worker with the node's own ``SandboxExecutor`` (the same bubblewrap, seccomp and limits
launch as a local session), so the run's timeout, output caps, memory limit, workspace
quota and crash detection are enforced on the node by the same code. What the worker
asks of the host (``call`` frames: tools, memory, live output) is not answered here: it
is handed to the host in the answer of its pending ``run``/``poll``, and the host's
``reply`` resolves it. Upstream connections and their credentials stay on the host.

The session's asyncio loop runs on a thread of its own (:class:`_Loop`): it serves the
host's direct link (:mod:`.link`: a run's messages over a TCP stream, the fast path) and
its timers (a run's timeout, the idle expiry); the actor's Ray methods hand their work to
it. The Ray calls carry the same run messages when the link is down: runs are named by a
random id and event batches numbered, so a run can move from the link to Ray midway.
Calls that must not wait behind a pending ``run``/``poll`` (``reply``, ``interrupt``,
``hold``...) go to the ``control`` concurrency group.

Nothing here imports Ray at module level: Ray imports this module by name on the node
(so the node must have the same codemode release; ``hello`` reports it).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import marshal
import os
import threading
from collections.abc import Callable, Coroutine
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import codemode_worker.protocol as worker_protocol

from ..errors import ExecutorError, RelayedCallError
from ..execution.base import PROTOCOL_VERSION, Worker
from ..result import ErrorInfo, ExecutionResult
from .link import HOLD as LINK_HOLD
from .link import INTERRUPT as LINK_INTERRUPT
from .link import REPLY as LINK_REPLY
from .link import RUN as LINK_RUN
from .link import LinkServer

log = logging.getLogger(__name__)

RELAY_VERSION = 5
"""The host <-> actor relay (method names, event shapes). Bump with any incompatible change."""

CALL, DONE, FAILED = "call", "done", "failed"
"""Event kinds. Events are plain tuples: ``(CALL, id, method, params)``,
``(DONE, result_fields)`` (see :func:`result_fields`), ``(FAILED, message)``. They come in
numbered batches ``(seq, [event, ...])``, 1, 2, ... within a run."""

PAST_RUNS = 1024
"""Run ids an actor remembers after their run, to refuse their request arriving late."""

MARSHAL_VERSION = 4
"""Stable since Python 3.4: a host and a node on different Python versions agree."""


def pack(data: Any) -> bytes | Any:
    """A run's request and events cross Ray as ``marshal`` bytes: Ray passes bytes as
    they are, while a tuple or a list of tuples goes through its pickling (measured: a
    run's actor call is ~0.1 ms faster each way). Everything on this path is plain data
    (the worker's JSON, result fields); anything else is sent as is, for Ray to pickle.
    marshal runs no code when loading, and both ends are codemode itself."""
    try:
        return marshal.dumps(data, MARSHAL_VERSION)
    except ValueError:  # an object marshal does not know (a subclass): Ray pickles it
        return data


def unpack(data: bytes | Any) -> Any:
    return marshal.loads(data) if isinstance(data, bytes) else data


_RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(ExecutionResult))


def result_fields(result: ExecutionResult) -> tuple[Any, ...]:
    """A result as a tuple in field order, its error as a tuple too: the cheapest shape
    to send (``dataclasses.asdict`` deep-copies every field; a run's result is flat)."""
    values = [getattr(result, name) for name in _RESULT_FIELDS]
    err = result.error
    values[_RESULT_FIELDS.index("error")] = (
        None if err is None else (err.type, err.message, err.traceback, err.lineno, err.offset)
    )
    return tuple(values)


def from_result_fields(values: tuple[Any, ...], duration_ms: float) -> ExecutionResult:
    """The host's side of :func:`result_fields` (same release on both ends: ``hello``)."""
    data = dict(zip(_RESULT_FIELDS, values, strict=True))
    err = data["error"]
    data["error"] = None if err is None else ErrorInfo(*err)
    data["warnings"] = tuple(data["warnings"] or ())
    data["duration_ms"] = duration_ms
    return ExecutionResult(**data)


def versions() -> dict[str, Any]:
    """What this install speaks: the host compares it with its own before a worker starts."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("codemode")
    except PackageNotFoundError:
        release = "unknown"
    return {
        "release": release,
        "relay": RELAY_VERSION,
        "protocol": PROTOCOL_VERSION,
        "worker_protocol": worker_protocol.VERSION,
    }


T = TypeVar("T")

CONTROL = "control"
"""Ray concurrency group (one thread: its calls start in the order they were sent) of the
calls that must not wait behind a pending ``run``/``poll``."""
CONTROL_METHODS = ("hello", "link", "pid", "reply", "hold", "interrupt", "kill", "expire_after")


class _Loop:
    """The session's asyncio loop on a thread of its own: it serves the link's streams as
    they speak, fires timers, and runs what the actor's Ray methods hand it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(
            target=self.loop.run_forever, name="codemode-session-loop", daemon=True
        ).start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        async def on_loop() -> T:
            return fn(*args)

        return self.run(on_loop())


class _Session:
    """One session's worker and its relay state; every method runs on the actor's loop."""

    def __init__(self, kind: str, options: dict[str, Any], expired: Callable[[], None]) -> None:
        self._expired = expired
        """Called (on the loop) once the session has been idle for ``expire_after``."""
        self._kind = kind
        self._options = options
        self._worker: Worker | None = None
        self._events: list[tuple[Any, ...]] = []
        self._wake = asyncio.Event()
        self._run_id = b""
        self._past: dict[bytes, None] = {}
        """The ids of the last ``PAST_RUNS`` runs before this one, oldest first."""
        self._running: asyncio.Task[None] | None = None
        self._sent: tuple[int, bytes] | None = None
        """The last batch sent: ``(seq, packed)``, sent again to a poll that missed it."""
        self._link: LinkServer | None = None
        self._closed = False
        self._calls: dict[int, asyncio.Future[tuple[bool, Any]]] = {}
        self._seq = 0
        self._holds: list[AbstractContextManager[None]] = []
        self._hold_seq = 0
        """The number of the last ``hold`` taken in this run (older ones, late, are not)."""
        self._expiry: asyncio.TimerHandle | None = None
        self._idle_after = 0.0
        self.expired = False
        """The idle expiry fired and nothing touched the session since."""

    # -- lifecycle -----------------------------------------------------------------
    async def start(self) -> int:
        """Start the worker on this node; returns its pid."""
        from ..execution.sandbox import SandboxExecutor
        from ..execution.subprocess import SubprocessExecutor

        # One session per actor: no pre-started spare workers on the node.
        options = {**self._options, "pool_size": 0}
        executor: SubprocessExecutor = (
            SandboxExecutor(**options) if self._kind == "sandbox" else SubprocessExecutor(**options)
        )
        self._worker = worker = await executor.start(self._relay)
        return int(getattr(worker, "pid", 0))

    async def open_link(self, host: str) -> tuple[str, int, bytes]:
        """Listen for the host's direct link on ``host`` (this node's address)."""
        if self._closed:
            raise ExecutorError("the session on this node is closed")
        link = self._link
        if link is None:
            link = self._link = LinkServer(self._answer, self._tell)
        address, port = await link.open(host)
        return address, port, link.secret

    async def _answer(self, op: str, arg: Any) -> bytes:
        if op == LINK_RUN:
            return await self.run(*arg)
        return await self.poll(*arg)

    def _tell(self, op: str, arg: Any) -> None:
        if op == LINK_REPLY:
            self.reply(*arg)
        elif op == LINK_HOLD:
            self.hold(*arg)
        elif op == LINK_INTERRUPT:
            self.interrupt(*arg)

    async def close(self) -> None:
        self._closed = True
        link, self._link = self._link, None
        if link is not None:
            await link.close()
        worker, self._worker = self._worker, None
        if worker is not None:
            await worker.close()

    def expire_after(self, seconds: float) -> None:
        """End this actor once no run has started for ``seconds`` (a detached actor has
        no owner whose exit would end it)."""
        self._idle_after = seconds
        self._touch()

    def _touch(self, *, arm: bool = True) -> None:
        self.expired = False
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if arm and self._idle_after > 0:
            loop = asyncio.get_running_loop()
            self._expiry = loop.call_later(self._idle_after, self._expire)

    def _expire(self) -> None:
        self.expired = True
        self._expired()

    # -- runs ------------------------------------------------------------------------
    async def run(self, run_id: bytes, code: str, timeout: float, ack: int) -> bytes:
        """Start the run ``run_id`` (or, when it started already, as the same request
        sent again after the link broke: a poll); answers with the first event batch."""
        if run_id == self._run_id:
            return await self.poll(run_id, ack)
        if run_id in self._past:
            # Its request came again after a later run began (a frame of a link that
            # broke, delivered late): the code ran once already, it must not run again.
            raise ExecutorError("a run that is over")
        worker = self._worker
        if worker is None or not worker.alive:
            raise ExecutorError("the session's worker on this node is not running")
        self._touch(arm=False)  # a run never expires: the idle time starts at its end
        if self._run_id:
            self._past[self._run_id] = None
            if len(self._past) > PAST_RUNS:
                del self._past[next(iter(self._past))]
        self._run_id, self._sent, self._hold_seq = run_id, None, 0
        self._running = asyncio.get_running_loop().create_task(self._run(worker, code, timeout))
        return await self.poll(run_id, 0)

    async def _run(self, worker: Worker, code: str, timeout: float) -> None:
        try:
            result = await worker.run(code, timeout)
        except Exception as exc:  # noqa: BLE001 - reported to the host as the run's end
            self._push((FAILED, f"{type(exc).__name__}: {exc}"))
            return
        finally:
            for cm in reversed(self._holds):
                cm.__exit__(None, None, None)
            self._holds.clear()
            self._touch()  # idle from the end of the run on
        self._push((DONE, result_fields(result)))

    async def poll(self, run_id: bytes, ack: int) -> bytes:
        """The batch of run ``run_id`` after ``ack`` (the last one the host received): the
        last batch sent again when the host did not get it (its stream broke), else the
        next events. A poll left over from an earlier run (a stream that broke without a
        word: a host gone with its network) ends at once and takes nothing."""
        while True:
            if run_id != self._run_id:
                raise ExecutorError("a poll of a run that is over")
            sent = self._sent
            if sent is not None and sent[0] > ack:
                return sent[1]
            if self._events:
                events, self._events = self._events, []
                seq = (sent[0] if sent is not None else 0) + 1
                self._sent = (seq, pack((seq, events)))
                self._notify()  # another poll waiting (the one of a broken link) sees it
                return self._sent[1]
            await self._wake.wait()

    def _notify(self) -> None:
        self._wake.set()
        self._wake = asyncio.Event()

    def _push(self, event: tuple[Any, ...]) -> None:
        self._events.append(event)
        self._notify()

    async def _relay(self, method: str, params: dict[str, Any]) -> Any:
        """The inner worker's call handler: the host answers it through ``reply``."""
        self._seq += 1
        cid = self._seq
        fut: asyncio.Future[tuple[bool, Any]] = asyncio.get_running_loop().create_future()
        self._calls[cid] = fut
        self._push((CALL, cid, method, params))
        try:
            ok, value = await fut
        finally:
            self._calls.pop(cid, None)
        if not ok:
            raise RelayedCallError(value)
        return value

    def reply(self, cid: int, ok: bool, value: Any) -> None:
        """The host's answer to a call (sent again after a broken link: taken once)."""
        fut = self._calls.get(cid)
        if fut is not None and not fut.done():
            fut.set_result((ok, value))

    # -- control -----------------------------------------------------------------------
    def hold(self, run_id: bytes, seq: int, depth: int) -> None:
        """Hold the running code's timeout while the host waits for a person: ``depth``
        holds in force, as of the host's ``seq``-th change in run ``run_id``. The host
        sends its state, not a step: one sent over the link and again over Ray after a
        break counts once, and one of them arriving after a later one changes nothing."""
        if run_id != self._run_id or seq <= self._hold_seq or self._worker is None:
            return
        if self._running is None or self._running.done():
            return  # its run is over: holds ended with it
        self._hold_seq = seq
        holds = self._holds
        while len(holds) < depth:
            cm = self._worker.hold_timeout()
            cm.__enter__()
            holds.append(cm)
        while len(holds) > depth:
            holds.pop().__exit__(None, None, None)

    def interrupt(self, run_id: bytes, kill_stuck: bool) -> bool:
        """Ctrl-C for run ``run_id`` (one sent for an earlier run, arriving late: nothing)."""
        if run_id != self._run_id:
            return False
        stop = getattr(self._worker, "interrupt", None)
        return bool(stop(kill_stuck=kill_stuck)) if stop is not None else False

    def kill(self) -> None:
        kill = getattr(self._worker, "kill", None)
        if kill is not None:
            kill()

    async def reset(self) -> None:
        if self._worker is None:
            raise ExecutorError("the session's worker on this node is not running")
        await self._worker.reset()

    def pid(self) -> int:
        with contextlib.suppress(AttributeError, TypeError):
            return int(getattr(self._worker, "pid", 0))
        return 0


class SessionActor:
    """One session's worker on a Ray node (made a Ray actor by :func:`actor_class`)."""

    # No ``async def`` here: one would make Ray run the actor as an async actor.
    def __init__(self, kind: str, options: dict[str, Any]) -> None:
        self._loop = _Loop()
        self._session = _Session(kind, options, self._end_soon)
        self._ending: asyncio.Task[bool] | None = None

    def _end_soon(self) -> None:  # on the loop, when the session expired
        self._ending = self._loop.loop.create_task(_end(self._session))

    def hello(self) -> dict[str, Any]:
        import ray

        ctx = ray.get_runtime_context()
        return {**versions(), "node": ctx.get_node_id(), "ip": ray.util.get_node_ip_address()}

    def link(self) -> tuple[str, int, bytes]:
        """Where the host's direct link connects, and its secret (only Ray's callers,
        whom Ray authenticated, ever learn it)."""
        import ray

        return self._loop.run(self._session.open_link(ray.util.get_node_ip_address()))

    def start(self) -> int:
        """Start the worker on this node; returns its pid."""
        return self._loop.run(self._session.start())

    def close(self) -> None:
        self._loop.run(self._session.close())

    def expire_after(self, seconds: float) -> None:
        """End this actor once no run has started for ``seconds`` (a detached actor has
        no owner whose exit would end it)."""
        self._loop.call(self._session.expire_after, seconds)

    def run(self, request: bytes) -> bytes:
        """Start a run (``pack((run_id, code, timeout, ack))``); answers with the first
        event batch."""
        return self._loop.run(self._session.run(*unpack(request)))

    def poll(self, request: bytes) -> bytes:
        """The event batch after ``ack`` (``pack((run_id, ack))``): calls the worker made,
        or the end of the run."""
        return self._loop.run(self._session.poll(*unpack(request)))

    def reply(self, answer: bytes | tuple[int, bool, Any]) -> None:
        """The host's answer to a call: ``pack((id, ok, value))``."""
        self._loop.call(self._session.reply, *unpack(answer))

    def hold(self, state: tuple[bytes, int, int]) -> None:
        """``(run_id, seq, depth)``: see ``_Session.hold``."""
        self._loop.call(self._session.hold, *state)

    def interrupt(self, run_id: bytes, kill_stuck: bool) -> bool:
        return self._loop.call(self._session.interrupt, run_id, kill_stuck)

    def kill(self) -> None:
        self._loop.call(self._session.kill)

    def reset(self) -> None:
        self._loop.run(self._session.reset())

    def pid(self) -> int:
        return self._session.pid()


async def _end(session: _Session) -> bool:
    """Close the worker, then end this actor, if the session is still expired (a run may
    have come between the expiry and this task: then False, and it lives on).
    An actor whose ending failed would live on with no worker, holding its node's CPU and
    memory, so it exits regardless."""
    import ray

    if not session.expired:
        return False
    try:
        await session.close()
    except Exception:
        log.exception("closing an expired session's worker failed; the actor ends anyway")
    try:
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
    except Exception:
        log.exception("ray.kill of an expired session's actor failed; it exits")
        os._exit(0)
    return True


def actor_class(ray: Any) -> Any:
    """:class:`SessionActor` as a Ray actor class: the calls of ``CONTROL_METHODS`` in
    their own concurrency group, so they never wait behind a pending ``run``/``poll``."""
    for name in CONTROL_METHODS:
        ray.method(concurrency_group=CONTROL)(getattr(SessionActor, name))
    return ray.remote(concurrency_groups={CONTROL: 1})(SessionActor)
