"""Host side of one worker process: frames in and out, the run in progress, its end.

Split from :mod:`.subprocess` (which starts workers: command line, environment, warm
pool) because the two change for different reasons: this half is the wire protocol and
the rules for a worker that breaks them, the other is how a process is launched.
Nothing from the worker is trusted: its frames are checked before they cost anything
(:mod:`.frames`), what the host buffers for it is bounded (:mod:`.pipes`), and any
violation stops that worker alone, settling everything that waited on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import subprocess
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from codemode_worker import protocol

from ..errors import ExecutorError
from ..hostapi import error_to_wire
from ..result import ErrorInfo, ExecutionResult
from .base import CALLS_STOP_WAIT, CallHandler, RunTimer, check_protocol, held, settle
from .frames import FrameError, FrameLimits
from .outcomes import crashed, finished, timed_out_result
from .pipes import Inbox, Outbox, OutboxFull, RawOutput
from .spawn import Spawned, reap_later

if TYPE_CHECKING:
    from .frame_schema import Frame


class WorkerLimits(Protocol):
    """What a worker reads of its executor (``SubprocessExecutor``; a protocol, so that
    module, which starts workers, and this one, which runs them, do not import each other)."""

    frame_limits: FrameLimits
    max_calls: int
    max_queued: int
    max_output: int
    memory_limit_mb: int | None
    interrupt_grace: float

    def describe_exit(self, returncode: int | None) -> str: ...


class _Crash(Exception):
    def __init__(self, info: str) -> None:
        super().__init__(info)
        self.info = info


def _consume(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


@dataclass(slots=True, eq=False)
class _Run:
    """The run in progress on a worker, and how it is being stopped (if it is)."""

    id: int
    fut: asyncio.Future[Any]
    context: contextvars.Context
    """The run's task's context as the run began: its calls are served in copies of it."""
    timer: RunTimer | asyncio.TimerHandle | None = None  # the timeout, then the grace
    stopping: str = ""  # "timeout", "cancelled" or a host limit's reason once interrupted
    output: tuple[bytearray, bytearray] | None = None


class SubprocessWorker:
    """Host side of one worker process."""

    def __init__(self, executor: WorkerLimits, spawned: Spawned, handler: CallHandler) -> None:
        self._ex = executor
        self._p = spawned
        self._handler = handler
        self._in = Inbox(
            spawned.from_fd,
            executor.frame_limits,
            on_frame=self._on_frame,
            on_error=self._fail,
            on_eof=self._on_eof,
        )
        self._out = Outbox(spawned.to_fd, executor.max_queued)
        self._raw = RawOutput(spawned.out_fd, spawned.err_fd, executor.max_output)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Future[Any] | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._calls: set[asyncio.Task[None]] = set()
        self._seq = 0
        self._run: _Run | None = None
        self._pidfd: int | None = None
        self._dead = False
        self._exit_info = ""
        self._tail = ""
        self._gone: asyncio.Future[None] | None = None
        self._eof_timer: asyncio.TimerHandle | None = None
        self._reaped: Any = None  # concurrent Future of the reaper thread

    @property
    def alive(self) -> bool:
        return not self._dead

    @property
    def pid(self) -> int:
        return self._p.proc.pid

    @property
    def exit_info(self) -> str:
        """Why the worker ended ("" while it lives)."""
        return self._exit_info

    @property
    def workspace(self) -> str | None:
        """The host directory mounted at /workspace, if the launch mounted one."""
        return self._p.workspace

    # -- wiring --------------------------------------------------------------------
    async def attach(self, timeout: float) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._gone = loop.create_future()
        self._out.attach(loop)
        self._in.attach(loop)
        self._raw.listen(loop)  # stderr says why a start failed
        try:
            self._pidfd = os.pidfd_open(self._p.proc.pid)
            loop.add_reader(self._pidfd, self._on_exit)
        except (AttributeError, OSError):
            self._pidfd = None
        # A worker from the warm pool said "ready" long ago: read it now instead of
        # waiting a turn of the loop for it (under load, each turn costs every session).
        self._in.read_now()
        try:
            if not self._ready.done():
                await asyncio.wait_for(self._ready, timeout)
            elif (failed := self._ready.exception()) is not None:
                raise failed
        except (TimeoutError, _Crash) as exc:
            info = exc.info if isinstance(exc, _Crash) else f"no answer within {timeout} s"
            self._fail(info)
            raise ExecutorError(
                f"the worker did not start: {info}"
                + (f"\nits stderr ended with:\n{self._tail}" if self._tail else "")
            ) from None
        except BaseException:
            self._fail("its start was cancelled")
            raise
        try:
            check_protocol(self._ready.result().get("protocol"))
        except ExecutorError as exc:
            self._fail(str(exc))
            await self._reaped_wait()
            raise
        self._raw.idle()  # output between runs is not read (see .pipes)

    def _on_frame(self, msg: Frame) -> None:
        if msg["op"] == "call":
            if self._ready is None or not self._ready.done():
                raise FrameError("a call before the worker said it was ready")
            assert self._loop is not None
            run = self._run
            # A call of the run is served in the run's context (its trace is current
            # there already: no layer has to make it so per call); a call between runs,
            # from a thread the code left behind, in an empty one: it must not inherit
            # the context of whatever task happened to start this worker's reader.
            task = self._loop.create_task(
                self._serve_call(msg["id"], msg["method"], msg["params"]),
                context=contextvars.Context() if run is None else run.context.copy(),
            )
            self._calls.add(task)
            task.add_done_callback(self._call_done)
            if len(self._calls) >= self._ex.max_calls:
                self._in.pause("calls")
        elif msg["op"] == "done":
            fut = self._pending.pop(msg["id"], None)
            if fut is None:
                if msg["id"] <= self._seq:  # a worker answers once: its code wrote one
                    raise FrameError(f"a second answer to request {msg['id']} (a forged one)")
                raise FrameError(f"an answer to request {msg['id']}, which it was never sent")
            run = self._run
            if run is not None and run.id == msg["id"]:
                self._run = None
                if run.timer is not None:
                    run.timer.cancel()
                run.output = self._raw.end_run()
            settle(fut, msg["result"])
        else:
            if self._ready is None or self._ready.done():
                raise FrameError("a second 'ready'")
            self._ready.set_result(msg)

    def _call_done(self, task: asyncio.Task[None]) -> None:
        self._calls.discard(task)
        if len(self._calls) < self._ex.max_calls:
            self._in.resume("calls")

    def _on_eof(self) -> None:
        """The worker closed its end of the protocol pipe: it is exiting (the pidfd says
        how), or it is broken and will never answer again."""
        assert self._loop is not None
        if self._p.proc.poll() is not None or self._pidfd is None:
            self._on_exit()
        elif self._eof_timer is None:
            self._eof_timer = self._loop.call_later(
                1.0, self._fail, "the worker closed its protocol pipe; it was stopped"
            )

    def _on_exit(self) -> None:
        if self._dead:
            return
        code = self._p.proc.poll()
        if code is None and self._pidfd is not None:
            return  # pipe closed by the worker but the process lives on: wait for pidfd
        self._fail(self._ex.describe_exit(code))

    def _fail(self, info: str) -> None:
        """The one way a worker ends: stop it, release its fds, and settle every future
        that waits on it (runs, resets, its start) with ``info``."""
        if self._dead:
            return
        self._dead = True
        self._exit_info = info
        self._tail = self._raw.tail()
        loop = self._loop
        self._in.close()
        if loop is not None and self._pidfd is not None:
            loop.remove_reader(self._pidfd)
        self._raw.close()
        self._out.close()
        for handle in (self._eof_timer, self._run.timer if self._run else None):
            if handle is not None:
                handle.cancel()
        self._run = None
        for task in self._calls:
            task.cancel()
        self._reaped = reap_later(self._p)
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
        for fut in [*self._pending.values(), self._ready]:
            if fut is not None and not fut.done():
                fut.set_exception(_Crash(info))
        self._pending.clear()
        if self._gone is not None:
            settle(self._gone)

    # -- sending ---------------------------------------------------------------------
    def _send(self, msg: dict[str, Any]) -> None:
        """Queue ``msg`` for the worker (its large bytes are attached, never copied)."""
        if not self._dead:
            self._queue(protocol.encode_parts(msg))

    def _queue(self, parts: list[bytes | bytearray | memoryview]) -> None:
        try:
            self._out.send(parts)
        except OutboxFull as full:
            self._fail(
                f"the worker did not read {full.args[0] / 2**20:.0f} MB of replies queued for "
                f"it (at most {self._ex.max_queued / 2**20:.0f} MB may wait); it was stopped"
            )

    async def _serve_call(self, cid: int, method: str, params: Any) -> None:
        try:
            # Params go as sent: the method's table row validates them (codemode.rpc).
            value = await self._handler(method, {} if params is None else params)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the agent's code
            self._send({"op": "reply", "id": cid, "ok": False, "error": error_to_wire(exc)})
            return
        try:
            self._send({"op": "reply", "id": cid, "ok": True, "value": value})
        except (TypeError, ValueError, RecursionError) as exc:
            # Not JSON (TypeError), not UTF-8 (a lone surrogate), nested beyond the encoder.
            what = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            err = {"type": "HostError", "message": f"the host's answer cannot be sent: {what}"}
            self._send({"op": "reply", "id": cid, "ok": False, "error": err})

    def _request(self, msg: dict[str, Any]) -> tuple[int, asyncio.Future[Any]]:
        if self._dead:
            raise _Crash(self._exit_info or "the worker is not running")
        assert self._loop is not None
        self._seq += 1
        fut = self._loop.create_future()
        self._send({**msg, "id": self._seq})  # first: a frame that cannot be encoded
        self._pending[self._seq] = fut  # leaves no future behind (its reply comes later)
        return self._seq, fut

    def _interrupt(self, run_id: int) -> None:
        with contextlib.suppress(OSError):  # a full control pipe: the grace kill follows
            os.write(self._p.ctrl_fd, b"i%d\n" % run_id)

    # -- Worker protocol ------------------------------------------------------------
    async def run(self, code: str, timeout: float) -> ExecutionResult:
        await self.idle()
        assert self._loop is not None
        start = time.perf_counter()
        try:
            rid, fut = self._request({"op": "run", "code": code})
        except _Crash as exc:
            await self._reaped_wait()
            return crashed(exc.info, self._tail, start)
        except ValueError as exc:  # a lone surrogate ("\udcff") has no UTF-8 form
            why = f"the code cannot be sent to the worker: {exc}"
            return ExecutionResult(
                error=ErrorInfo("SyntaxError", why),
                duration_ms=(time.perf_counter() - start) * 1000,
            )
        run = self._run = _Run(rid, fut, contextvars.copy_context())
        self._raw.begin_run()
        # The timeout runs only while it is not held (a person is asked: hold_timeout).
        run.timer = RunTimer(self._loop, timeout, lambda: self._stop(run, "timeout"))
        try:
            payload = await fut
        except asyncio.CancelledError:
            # The caller is gone (a client's cancellation, a closed request): stop the
            # code exactly as a timeout would, without making the caller wait for it.
            if fut.cancelled() and self._pending.get(rid) is fut:
                run.fut = self._pending[rid] = self._loop.create_future()  # for idle()
                run.fut.add_done_callback(_consume)  # nobody awaits it any more
            self._stop(run, "cancelled")
            raise
        except _Crash as exc:
            await self._reaped_wait()
            if run.stopping == "timeout":
                return timed_out_result(timeout, start, state_lost=True)
            return crashed(exc.info, self._tail, start)
        return finished(
            payload,
            run.output,
            timed_out=run.stopping == "timeout",
            timeout=timeout,
            start=start,
            max_output=self._ex.max_output,
            memory_limit_mb=self._ex.memory_limit_mb,
        )

    def hold_timeout(self) -> AbstractContextManager[None]:
        run = self._run
        return held(run.timer if run is not None and isinstance(run.timer, RunTimer) else None)

    async def _reaped_wait(self) -> None:
        """A dead worker's processes and cgroups are gone before anyone hears of its death."""
        if self._reaped is not None:
            await asyncio.shield(asyncio.wrap_future(self._reaped))

    async def idle(self) -> None:
        """Wait until a run stopped by its timeout or a cancellation has ended: at most
        the interrupt grace, after which its worker is killed."""
        run = self._run
        if run is not None and run.stopping and not run.fut.done():
            await asyncio.wait([run.fut])
        await self._reaped_wait()

    def _stop(self, run: _Run, why: str) -> None:
        if run.fut.done() or self._dead or run.stopping:
            return
        run.stopping = why
        if run.timer is not None:
            run.timer.cancel()
        self._interrupt(run.id)
        assert self._loop is not None
        run.timer = self._loop.call_later(self._ex.interrupt_grace, self._kill_stuck, run)

    def _kill_stuck(self, run: _Run) -> None:
        if not run.fut.done():
            if run.stopping not in ("timeout", "cancelled", "interrupted"):
                self._fail(run.stopping)  # a host-side limit's own reason (see stop_run)
                return
            what = " was cancelled and" if run.stopping == "cancelled" else ""
            self._fail(f"the run{what} did not stop when interrupted; the worker was killed")

    def interrupt(self, *, kill_stuck: bool = True) -> bool:
        """Stop the running code as Ctrl-C would (KeyboardInterrupt); with ``kill_stuck``,
        the worker is killed if the code does not stop within the grace period. False when
        nothing is running."""
        run = self._run
        if run is None or run.fut.done() or self._dead:
            return False
        if kill_stuck:
            self._stop(run, "interrupted")
        else:
            self._interrupt(run.id)
        return True

    def kill(self) -> None:
        """Stop the worker at once (its process group included), and wait (briefly) until
        it is gone: the caller may exit right after, before a reaper thread runs."""
        self._fail("the worker was killed")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._p.proc.wait(timeout=2)

    def end(self, reason: str) -> None:
        """Kill the worker now for a host-side limit; its next run fails with ``reason``."""
        self._fail(reason)

    def stop_run(self, reason: str) -> None:
        """Interrupt the running code for a host-side limit other than the timeout (a
        quota); kill the worker with ``reason`` if it has not stopped within the grace."""
        if self._run is not None:
            self._stop(self._run, reason)

    async def reset(self) -> None:
        await self.idle()
        try:
            _, fut = self._request({"op": "reset"})
            await asyncio.wait_for(fut, 10)
        except (TimeoutError, _Crash):
            self._fail("the worker did not reset")
            raise ExecutorError("the worker did not answer a reset; it was stopped") from None

    async def close(self) -> None:
        try:
            if not self._dead:
                self._send({"op": "shutdown"})
                if self._gone is not None and self._pidfd is not None:
                    # The pidfd (or EOF) reader notices the exit as soon as it happens.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(self._gone), 0.5)
        finally:  # a close that is cancelled still ends the worker
            self._fail("the worker was closed")
        if self._calls:
            # Its calls were cancelled: let them clean up (a server being started is
            # stopped) while the loop runs; a program's exit would cut that short.
            await asyncio.wait(set(self._calls), timeout=CALLS_STOP_WAIT)
        await self._reaped_wait()
