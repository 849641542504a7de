"""The node side of a Ray session: one actor that holds one sandboxed worker.

The actor runs in a Ray worker process on whichever node Ray placed it. It starts the
worker with the node's own ``SandboxExecutor`` (the same bubblewrap, seccomp and limits
launch as a local session), so the run's timeout, output caps, memory limit, workspace
quota and crash detection are enforced on the node by the same code. What the worker
asks of the host (``call`` frames: tools, memory, live output) is not answered here: it
is handed to the host in the answer of its pending ``run``/``poll``, and the host's
``reply`` resolves it. Upstream connections and their credentials stay on the host.

The actor is a plain (not ``async``) Ray actor: Ray hands an ``async`` actor's call to
the actor's event-loop thread and parks its own thread until the method ends, two thread
wake-ups more per call (measured: 0.15-0.5 ms of a run, docs/ray.md). Here the thread of
the call that waits (``run``, ``poll``, ``start``...) runs the session's asyncio loop itself
while it waits (:class:`_Driver`); calls that must not wait behind it (``reply``,
``interrupt``, ``hold``...) go to the ``control`` concurrency group and hand their work to
the loop; between calls a keeper thread turns the loop once a second, so
timers (a run's timeout, the idle expiry) fire even when no host is waiting.

Nothing here imports Ray at module level: Ray imports this module by name on the node
(so the node must have the same codemode release; ``hello`` reports it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
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

log = logging.getLogger(__name__)

RELAY_VERSION = 2
"""The host <-> actor relay (method names, event shapes). Bump with any incompatible change."""

CALL, DONE, FAILED = "call", "done", "failed"
"""Event kinds. Events are plain tuples: ``(CALL, id, method, params)``,
``(DONE, result_fields)`` (see :func:`result_fields`), ``(FAILED, message)``."""

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
CONTROL_METHODS = ("hello", "pid", "reply", "hold", "interrupt", "kill", "expire_after")
KEEP_EVERY = 1.0
"""Seconds between the keeper's turns of a loop no call runs: timers fire this late at
most then (only a host that stopped polling mid-run, or an idle expiry, waits on them).
A turn costs ~10 us of CPU: 350 idle sessions on a node cost it ~0.4 % of a core."""


class _Driver:
    """The actor's asyncio loop, run by the thread that needs it.

    A waiting call runs the loop until its coroutine ends (:meth:`run`, one at a time: the
    default concurrency group has one thread, the lock covers the keeper). A control call
    queues its function on the loop and, when nobody runs the loop, turns it once itself
    (:meth:`call`). The keeper thread does the same every ``KEEP_EVERY`` seconds, and runs
    the actor's end once the session expired (:meth:`end_soon`)."""

    def __init__(self, end: Callable[[], Coroutine[Any, Any, bool]]) -> None:
        self.loop = asyncio.new_event_loop()
        self._lock = threading.Lock()
        self._end = end
        self._ending = False
        self._nudge = threading.Event()
        threading.Thread(target=self._keep, name="codemode-loop-keeper", daemon=True).start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._lock:
            return self.loop.run_until_complete(coro)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def on_loop() -> None:
            try:
                done.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
                done.set_exception(exc)

        self.loop.call_soon_threadsafe(on_loop)
        while True:
            self.turn()
            with contextlib.suppress(concurrent.futures.TimeoutError):
                # A thread running the loop picks it up at once; one that was just ending
                # its run may not have: turn the loop here then.
                return done.result(timeout=0.01)

    def turn(self) -> None:
        """Run what is due on the loop (ready callbacks, I/O, timers) unless a call runs it."""
        if self._lock.acquire(blocking=False):
            try:
                self.loop.run_until_complete(asyncio.sleep(0))
            finally:
                self._lock.release()

    def end_soon(self) -> None:
        self._ending = True
        self._nudge.set()

    def _keep(self) -> None:
        while True:
            self._nudge.wait(KEEP_EVERY)
            if self._ending:
                self._ending = False
                if self.run(self._end()):
                    return
                continue  # a call came between the expiry and this turn: not idle now
            self.turn()


class _Session:
    """One session's worker and its relay state; every method runs on the actor's loop."""

    def __init__(self, kind: str, options: dict[str, Any], expired: Callable[[], None]) -> None:
        self._expired = expired
        """Called (on the loop) once the session has been idle for ``expire_after``."""
        self._kind = kind
        self._options = options
        self._worker: Worker | None = None
        self._events: list[tuple[Any, ...]] = []
        self._wake: asyncio.Event | None = None
        self._calls: dict[int, asyncio.Future[tuple[bool, Any]]] = {}
        self._seq = 0
        self._holds: list[AbstractContextManager[None]] = []
        self._expiry: asyncio.TimerHandle | None = None
        self._idle_after = 0.0
        self.expired = False
        """The idle expiry fired and nothing touched the session since."""

    # -- lifecycle -----------------------------------------------------------------
    async def start(self) -> int:
        """Start the worker on this node; returns its pid."""
        from ..execution.sandbox import SandboxExecutor
        from ..execution.subprocess import SubprocessExecutor

        self._wake = asyncio.Event()
        # One session per actor: no pre-started spare workers on the node.
        options = {**self._options, "pool_size": 0}
        executor: SubprocessExecutor = (
            SandboxExecutor(**options) if self._kind == "sandbox" else SubprocessExecutor(**options)
        )
        self._worker = worker = await executor.start(self._relay)
        return int(getattr(worker, "pid", 0))

    async def close(self) -> None:
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
    async def run(self, request: bytes) -> bytes | list[tuple[Any, ...]]:
        """Start a run (``pack((code, timeout))``); answers with the first events (the
        result, or calls to serve), packed."""
        code, timeout = unpack(request)
        worker = self._worker
        if worker is None or not worker.alive:
            raise ExecutorError("the session's worker on this node is not running")
        self._touch(arm=False)  # a run never expires: the idle time starts at its end
        asyncio.get_running_loop().create_task(self._run(worker, code, timeout))
        return await self.poll()

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

    async def poll(self) -> bytes | list[tuple[Any, ...]]:
        """Wait for events: calls the worker made, or the end of the run."""
        assert self._wake is not None
        while not self._events:
            self._wake.clear()
            await self._wake.wait()
        events, self._events = self._events, []
        return pack(events)

    def _push(self, event: tuple[Any, ...]) -> None:
        self._events.append(event)
        if self._wake is not None:
            self._wake.set()

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

    def reply(self, answer: bytes | tuple[int, bool, Any]) -> None:
        """The host's answer to a call: ``pack((id, ok, value))``."""
        cid, ok, value = unpack(answer)
        fut = self._calls.get(cid)
        if fut is not None and not fut.done():
            fut.set_result((ok, value))

    # -- control -----------------------------------------------------------------------
    def hold(self, on: bool) -> None:
        """Hold (or release) the running code's timeout while the host waits for a person."""
        if on and self._worker is not None:
            cm = self._worker.hold_timeout()
            cm.__enter__()
            self._holds.append(cm)
        elif not on and self._holds:
            self._holds.pop().__exit__(None, None, None)

    def interrupt(self, kill_stuck: bool) -> bool:
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
        self._session = session = _Session(kind, options, lambda: self._driver.end_soon())
        self._driver = _Driver(lambda: _end(session))

    def hello(self) -> dict[str, Any]:
        import ray

        ctx = ray.get_runtime_context()
        return {**versions(), "node": ctx.get_node_id(), "ip": ray.util.get_node_ip_address()}

    def start(self) -> int:
        """Start the worker on this node; returns its pid."""
        return self._driver.run(self._session.start())

    def close(self) -> None:
        self._driver.run(self._session.close())

    def expire_after(self, seconds: float) -> None:
        """End this actor once no run has started for ``seconds`` (a detached actor has
        no owner whose exit would end it)."""
        self._driver.call(self._session.expire_after, seconds)

    def run(self, request: bytes) -> bytes | list[tuple[Any, ...]]:
        """Start a run (``pack((code, timeout))``); answers with the first events."""
        return self._driver.run(self._session.run(request))

    def poll(self) -> bytes | list[tuple[Any, ...]]:
        """Wait for events: calls the worker made, or the end of the run."""
        return self._driver.run(self._session.poll())

    def reply(self, answer: bytes | tuple[int, bool, Any]) -> None:
        self._driver.call(self._session.reply, answer)

    def hold(self, on: bool) -> None:
        self._driver.call(self._session.hold, on)

    def interrupt(self, kill_stuck: bool) -> bool:
        return self._driver.call(self._session.interrupt, kill_stuck)

    def kill(self) -> None:
        self._driver.call(self._session.kill)

    def reset(self) -> None:
        self._driver.run(self._session.reset())

    def pid(self) -> int:
        return self._session.pid()


async def _end(session: _Session) -> bool:
    """Close the worker, then end this actor, if the session is still expired (a run may
    have taken the loop between the expiry and the keeper: then False, and it lives on).
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
