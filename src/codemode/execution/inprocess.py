"""Runs code in the host process, on a thread of its own: the fastest executor.

NO SECURITY BOUNDARY: the code has everything the host has (files, environment,
credentials, memory). Use it for trusted code and tests. A timeout raises an exception in
the code's thread; code stuck in C cannot be stopped, so its thread is abandoned and the
session continues with fresh state.
"""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import queue
import threading
import time
from collections.abc import Awaitable
from concurrent.futures import Future, InvalidStateError
from contextlib import AbstractContextManager
from dataclasses import replace
from functools import partial
from typing import Any

from codemode_worker import namespaces, protocol
from codemode_worker.bridge import set_link
from codemode_worker.errors import from_wire
from codemode_worker.runtime import Runtime, install_routers

from ..hostapi import error_to_wire
from ..result import ErrorInfo, ExecutionResult, timeout_error
from .base import CALLS_STOP_WAIT, CallHandler, RunTimer, check_protocol, held, settle


class _LoopLink:
    """HostLink that runs host handlers on the host's event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, handler: CallHandler) -> None:
        self._loop = loop
        self._handler = handler
        self.calls: set[asyncio.Task[Any]] = set()  # in flight; touched on the loop only
        self.context: contextvars.Context | None = None
        """The context of the running run's task (None between runs): its calls are served
        in copies of it, as the subprocess worker serves them (``SubprocessWorker``)."""

    async def _call(self, method: str, params: dict[str, Any]) -> Any:
        task = asyncio.current_task()
        if task is not None:
            self.calls.add(task)
        try:
            return await self._handler(method, params)
        except Exception as exc:  # noqa: BLE001 - re-raised as the worker-side class
            raise from_wire(error_to_wire(exc)) from None
        finally:
            self.calls.discard(task)

    def cancel_calls(self) -> set[asyncio.Task[Any]]:
        """Cancel the calls in flight (their code is gone); returns them, to wait for."""
        calls = set(self.calls)
        for task in calls:
            task.cancel()
        return calls

    def _submit(self, method: str, params: dict[str, Any]) -> Future[Any]:
        """``run_coroutine_threadsafe``, with the task's context chosen on the loop: the
        run's when one runs, else an empty one (a thread the code left running must not
        inherit a finished run's trace or identity, nor the code thread's)."""
        done: Future[Any] = Future()
        self._loop.call_soon_threadsafe(self._start, method, params, done)
        return done

    def _start(self, method: str, params: dict[str, Any], done: Future[Any]) -> None:
        if done.cancelled():
            return
        ctx = self.context
        task = self._loop.create_task(
            self._call(method, params),
            context=contextvars.Context() if ctx is None else ctx.copy(),
        )
        task.add_done_callback(partial(_hand_over, done))
        done.add_done_callback(partial(_cancel_when_cancelled, self._loop, task))

    def call_async(self, method: str, params: dict[str, Any]) -> Awaitable[Any]:
        return asyncio.wrap_future(self._submit(method, params))

    def call(self, method: str, params: dict[str, Any]) -> Any:
        return self._submit(method, params).result()


def _hand_over(done: Future[Any], task: asyncio.Task[Any]) -> None:
    """The task's outcome to the caller's future (on the loop)."""
    try:
        if task.cancelled():
            done.cancel()
        elif (exc := task.exception()) is not None:
            done.set_exception(exc)
        else:
            done.set_result(task.result())
    except InvalidStateError:  # the caller cancelled it meanwhile, from its thread
        pass


def _cancel_when_cancelled(
    loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], done: Future[Any]
) -> None:
    """The caller gave up on the call (from its thread): so does the loop."""
    if done.cancelled() and not loop.is_closed():
        loop.call_soon_threadsafe(task.cancel)


_shared_link: _RoutingLink | None = None


class _RoutingLink:
    """One process-wide link that forwards to the link of the calling session's thread."""

    def __init__(self) -> None:
        self.local = threading.local()

    def _link(self) -> _LoopLink:
        link: _LoopLink | None = getattr(self.local, "link", None)
        if link is None:
            raise RuntimeError("tools are only reachable from a session's own thread")
        return link

    def call(self, method: str, params: dict[str, Any]) -> Any:
        return self._link().call(method, params)

    def here(self) -> _LoopLink | None:
        """The calling thread's own link (for helpers that call from other threads)."""
        return getattr(self.local, "link", None)

    def adopt(self, link: _LoopLink | None) -> None:
        """Let the calling thread use ``link`` (one taken with ``here`` in another)."""
        self.local.link = link

    def call_async(self, method: str, params: dict[str, Any]) -> Awaitable[Any]:
        return self._link().call_async(method, params)


def _routing_link() -> _RoutingLink:
    global _shared_link
    if _shared_link is None:
        _shared_link = _RoutingLink()
        set_link(_shared_link)
    return _shared_link


class InProcessExecutor:
    """Executes in this process (trusted code only; documented as no boundary)."""

    def __init__(self, *, max_output: int = 1_000_000, interrupt_grace: float = 1.0) -> None:
        self.max_output = max_output
        self.interrupt_grace = interrupt_grace

    async def start(self, handler: CallHandler) -> InProcessWorker:
        check_protocol(protocol.VERSION)  # codemode_worker may come from another install
        return InProcessWorker(self, asyncio.get_running_loop(), handler)


class InProcessWorker:
    def __init__(
        self, ex: InProcessExecutor, loop: asyncio.AbstractEventLoop, handler: CallHandler
    ) -> None:
        self._ex = ex
        self._loop = loop
        self._link = _LoopLink(loop, handler)
        self._closed = False
        self._running: tuple[asyncio.Future[Any], asyncio.Future[None]] | None = None
        self._stopped: asyncio.Future[None] | None = None
        self._timer: RunTimer | None = None
        self._start_thread()

    def _start_thread(self) -> None:
        self._jobs: queue.Queue[tuple[str, str, asyncio.Future[Any]] | None] = queue.Queue()
        self._runtime = Runtime(self._ex.max_output, install_namespaces=namespaces.install)
        install_routers(lambda: None, fallback=True)
        self._thread = threading.Thread(target=self._serve, name="codemode-inprocess", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return not self._closed

    def _serve(self) -> None:
        _routing_link().local.link = self._link
        runtime, jobs, loop = self._runtime, self._jobs, self._loop
        while True:
            job = jobs.get()
            if job is None:
                runtime.close()
                return
            op, code, fut = job
            result: Any = None
            try:
                if op == "run":
                    result = runtime.run(code)
                    result.pop("usage", None)  # the host process's, not the run's
                else:
                    runtime.reset()
            except BaseException as exc:  # noqa: BLE001 - a late async interrupt
                result = {"error": {"type": type(exc).__name__, "message": str(exc)}}
            if not loop.is_closed():
                loop.call_soon_threadsafe(settle, fut, result)

    async def _submit(self, op: str, code: str = "") -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._jobs.put((op, code, fut))
        return fut

    async def run(self, code: str, timeout: float) -> ExecutionResult:
        start = time.perf_counter()
        self._link.context = contextvars.copy_context()  # before the code can call
        try:
            fut = await self._submit("run", code)
            stop: asyncio.Future[None] = self._loop.create_future()
            self._running = (fut, stop)
            try:
                return await self._wait(fut, stop, timeout, start)
            except asyncio.CancelledError:
                self._stop_cancelled(fut)
                raise
        finally:
            self._running = None
            self._link.context = None

    def _stop_cancelled(self, fut: asyncio.Future[Any]) -> None:
        """The caller is gone: interrupt the code; past the grace, abandon its thread (the
        worker then reports itself dead, and the session starts a fresh one)."""
        if fut.done():
            return
        self._interrupt()
        stopped = self._stopped = self._loop.create_future()
        fut.add_done_callback(lambda _: settle(stopped))

        def give_up() -> None:
            if not fut.done():
                self._jobs.put(None)
                self._closed = True
                self._link.cancel_calls()
            settle(stopped)

        self._loop.call_later(self._ex.interrupt_grace, give_up)

    async def idle(self) -> None:
        if self._stopped is not None:
            await asyncio.shield(self._stopped)

    def interrupt(self, *, kill_stuck: bool = True) -> bool:
        """Raise KeyboardInterrupt in the running code (as Ctrl-C would); False when
        nothing is running. Code stuck in C cannot see it: with ``kill_stuck``, after the
        grace period its thread is abandoned (state lost) and the run returns what it
        printed so far."""
        running = self._running
        if running is None or running[0].done():
            return False
        if kill_stuck:
            settle(running[1])
        else:
            self._interrupt()
        return True

    async def _wait(
        self, fut: asyncio.Future[Any], stop: asyncio.Future[None], timeout: float, start: float
    ) -> ExecutionResult:
        # The timeout runs only while it is not held (a person is asked: hold_timeout).
        expired: asyncio.Future[None] = self._loop.create_future()
        timer = self._timer = RunTimer(self._loop, timeout, lambda: settle(expired))
        try:
            await asyncio.wait({fut, stop, expired}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            self._timer = None
        if fut.done():
            return ExecutionResult.from_payload(fut.result(), self._ms(start))
        timed_out = not stop.done()
        self._interrupt()
        try:
            payload = await asyncio.wait_for(asyncio.shield(fut), self._ex.interrupt_grace)
        except TimeoutError:
            return self._abandon(timeout if timed_out else None, start)
        res = ExecutionResult.from_payload(payload, self._ms(start))
        if not timed_out:
            return res
        tb = res.error.traceback if res.error else ""
        lineno = res.error.lineno if res.error else None
        return replace(
            res, timed_out=True, error=timeout_error(timeout, traceback=tb, lineno=lineno)
        )

    def _abandon(self, timeout: float | None, start: float) -> ExecutionResult:
        """A thread cannot be killed: keep what it printed, abandon it, start over."""
        captured = self._runtime.active()
        out = err = ""
        if captured is not None:
            for capture in captured:
                capture.state = "stopped"
            out, err = captured[0].text(), captured[1].text()
        self._jobs.put(None)
        self._link.cancel_calls()  # the abandoned thread's: nobody will read their answers
        self._start_thread()
        if timeout is not None:
            error = timeout_error(timeout, state_lost=True)
        else:
            error = ErrorInfo(
                "KeyboardInterrupt",
                "the code did not stop when interrupted (stuck outside Python); its thread "
                "was abandoned and the session's state was lost",
            )
        return ExecutionResult(
            stdout=out,
            stderr=err,
            error=error,
            timed_out=timeout is not None,
            state_lost=True,
            duration_ms=self._ms(start),
        )

    @staticmethod
    def _ms(start: float) -> float:
        return (time.perf_counter() - start) * 1000

    def hold_timeout(self) -> AbstractContextManager[None]:
        return held(self._timer)

    def _interrupt(self) -> None:
        tid = self._thread.ident
        if tid is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(tid), ctypes.py_object(KeyboardInterrupt)
            )

    async def reset(self) -> None:
        await (await self._submit("reset"))

    async def close(self) -> None:
        closing = not self._closed
        if closing:
            self._closed = True
            self._jobs.put(None)
        # As the subprocess worker does: its calls are cancelled, and given time to clean
        # up (a server being started is stopped) while the loop runs.
        calls = self._link.cancel_calls()
        if calls:
            await asyncio.wait(calls, timeout=CALLS_STOP_WAIT)
        if closing:
            # The thread closes its event loop on the way out; wait for it briefly.
            await asyncio.to_thread(self._thread.join, 2.0)
