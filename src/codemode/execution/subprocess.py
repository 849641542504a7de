"""One persistent worker process per session, talking framed JSON over pipes.

The host side is asyncio with raw fds (``add_reader``, non-blocking writes): a run costs
two pipe hops and no thread hand-offs. Process exit is watched with a pidfd, so a worker
that dies while a forked child still holds its pipes is noticed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import codemode_worker
from codemode_worker import protocol

from ..errors import ExecutorError
from ..hostapi import error_to_wire
from ..observability import signals
from ..result import ErrorInfo, ExecutionResult, timeout_error
from .base import CallHandler, RunTimer, check_protocol, held, settle
from .pool import get_pool

WORKER_ROOT = str(Path(codemode_worker.__file__).resolve().parent.parent)
BOOTSTRAP = (
    "import sys,json;c=json.loads(sys.argv[1]);sys.path.insert(0,c['root']);"
    "from codemode_worker.main import main;main(c)"
)
_TAIL = 4096
DEFAULT_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


@dataclass(slots=True)
class LaunchSpec:
    """How to start one worker; executors that wrap the worker (sandbox) rewrite it."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None
    pass_fds: tuple[int, ...] = ()
    close_after_spawn: tuple[int, ...] = ()
    cleanup: Callable[[], None] | None = None


@dataclass(slots=True)
class Spawned:
    """A started worker process, not yet tied to an event loop (so it can be pooled)."""

    proc: subprocess.Popen[bytes]
    to_fd: int
    from_fd: int
    err_fd: int
    out_fd: int
    ctrl_fd: int
    cleanup: Callable[[], None] | None = None
    started: float = field(default_factory=time.perf_counter)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def destroy(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        for fd in (self.to_fd, self.from_fd, self.err_fd, self.out_fd, self.ctrl_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        if self.cleanup is not None:
            self.cleanup()
            self.cleanup = None


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "the worker stopped answering"
    if returncode < 0:
        sig = -returncode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        hint = {
            int(signal.SIGKILL): " (killed: out of memory, or by another process)",
            int(signal.SIGSEGV): " (segmentation fault)",
            int(signal.SIGABRT): " (aborted)",
        }.get(sig, "")
        return f"the worker was killed by signal {sig} ({name}){hint}"
    return f"the worker exited with status {returncode}"


class SubprocessExecutor:
    """Runs each session's code in its own persistent Python process.

    Not a security boundary by itself (the process has the host user's rights): use
    ``SandboxExecutor`` for untrusted code. The worker gets a cleared environment.
    """

    def __init__(
        self,
        *,
        python: str | None = None,
        memory_limit_mb: int | None = 1024,
        pool_size: int = 2,
        interrupt_grace: float = 1.0,
        max_output: int = 1_000_000,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        deps_dir: str | os.PathLike[str] | None = None,
        site_packages: bool = True,
        start_timeout: float = 15.0,
        max_frame_mb: int = 256,
    ) -> None:
        self.python = python or sys.executable
        self.memory_limit_mb = memory_limit_mb
        self.pool_size = pool_size
        self.interrupt_grace = interrupt_grace
        self.max_output = max_output
        self.cwd = str(cwd) if cwd is not None else None
        self.env = dict(env or {})
        self.deps_dir = str(deps_dir) if deps_dir is not None else None
        self.site_packages = site_packages
        self.start_timeout = start_timeout
        # What one message from the worker may hold (untrusted: it bounds host memory).
        self.max_frame = max_frame_mb * 1024 * 1024

    # -- launching -------------------------------------------------------------
    def worker_config(self) -> dict[str, Any]:
        tail: list[str] = []
        if self.site_packages:
            paths = sysconfig.get_paths()
            tail = list(dict.fromkeys([paths["purelib"], paths["platlib"]]))
        return {
            "root": WORKER_ROOT,
            "paths": [self.deps_dir] if self.deps_dir else [],
            "tail_paths": tail,
            "memory_limit_mb": self.memory_limit_mb,
            "max_output": self.max_output,
            "cwd": self.cwd,
        }

    def launch_spec(self, config: dict[str, Any]) -> LaunchSpec:
        """The command for one worker; override to wrap it (see SandboxExecutor)."""
        argv = [self.python, "-I", "-S", "-c", BOOTSTRAP, json.dumps(config)]
        return LaunchSpec(argv=argv, env={**DEFAULT_ENV, **self.env}, cwd=self.cwd)

    def describe_exit(self, returncode: int | None) -> str:
        """Say how the worker ended; wrappers that report signals differently override it."""
        return describe_exit(returncode)

    def pool_key(self) -> tuple[Any, ...]:
        return (
            self.pool_size,
            type(self).__qualname__,
            json.dumps(self.worker_config(), sort_keys=True),
            json.dumps(self.env, sort_keys=True),
            self.python,
        )

    def spawn(self) -> Spawned:
        out_r, out_w = os.pipe()
        ctrl_r, ctrl_w = os.pipe()
        config = {**self.worker_config(), "out_fd": out_w, "ctrl_fd": ctrl_r}
        spec = self.launch_spec(config)
        try:
            proc = subprocess.Popen(
                spec.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(out_w, ctrl_r, *spec.pass_fds),
                env=spec.env,
                cwd=spec.cwd,
                start_new_session=True,
                bufsize=0,
            )
        except OSError as exc:
            for fd in (out_r, out_w, ctrl_r, ctrl_w, *spec.close_after_spawn):
                os.close(fd)
            if spec.cleanup:
                spec.cleanup()
            raise ExecutorError(f"cannot start the worker ({spec.argv[0]}): {exc}") from exc
        for fd in (out_w, ctrl_r, *spec.close_after_spawn):
            os.close(fd)
        assert proc.stdin and proc.stdout and proc.stderr
        # Take the raw fds away from the file objects so only we close them.
        to_fd, from_fd, err_fd = (
            os.dup(f.fileno()) for f in (proc.stdin, proc.stdout, proc.stderr)
        )
        for f in (proc.stdin, proc.stdout, proc.stderr):
            f.close()
        for fd in (to_fd, from_fd, err_fd, out_r, ctrl_w):
            os.set_inheritable(fd, False)
        os.set_blocking(to_fd, False)
        return Spawned(proc, to_fd, from_fd, err_fd, out_r, ctrl_w, cleanup=spec.cleanup)

    # -- Executor protocol -------------------------------------------------------
    async def start(self, handler: CallHandler) -> SubprocessWorker:
        began = time.perf_counter()
        pool = get_pool(self.pool_key(), self.spawn, self.pool_size)
        spawned = pool.take()
        source = "pool"
        if spawned is None:
            spawned, source = self.spawn(), "spawn"
        worker = SubprocessWorker(self, spawned, handler)
        try:
            await worker.attach(self.start_timeout)
        finally:
            asyncio.get_running_loop().call_soon(pool.refill)
        signals.worker_acquired(time.perf_counter() - began, source)
        return worker

    async def warm(self) -> None:
        """Fill the warm pool now, so the next sessions start without booting Python."""
        get_pool(self.pool_key(), self.spawn, self.pool_size).refill()


class _Crash(Exception):
    def __init__(self, info: str) -> None:
        super().__init__(info)
        self.info = info


class SubprocessWorker:
    """Host side of one worker process."""

    def __init__(
        self, executor: SubprocessExecutor, spawned: Spawned, handler: CallHandler
    ) -> None:
        self._ex = executor
        self._p = spawned
        self._handler = handler
        self._buf = protocol.FrameBuffer(executor.max_frame)
        self._wbuf = bytearray()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Future[Any] | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._calls: set[asyncio.Task[None]] = set()
        self._seq = 0
        self._raw: tuple[bytearray, bytearray] | None = None
        self._err_tail = bytearray()
        self._pidfd: int | None = None
        self._dead = False
        self._exit_info = ""
        self._timed_out = False
        self._running: asyncio.Future[Any] | None = None
        self._gone: asyncio.Future[None] | None = None
        self._grace: asyncio.TimerHandle | None = None
        self._timer: RunTimer | None = None

    @property
    def alive(self) -> bool:
        return not self._dead

    @property
    def pid(self) -> int:
        return self._p.proc.pid

    # -- wiring --------------------------------------------------------------------
    async def attach(self, timeout: float) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._gone = loop.create_future()
        loop.add_reader(self._p.from_fd, self._on_proto)
        loop.add_reader(self._p.out_fd, self._on_raw, 0)
        loop.add_reader(self._p.err_fd, self._on_raw, 1)
        try:
            self._pidfd = os.pidfd_open(self._p.proc.pid)
            loop.add_reader(self._pidfd, self._on_exit)
        except (AttributeError, OSError):
            self._pidfd = None
        try:
            await asyncio.wait_for(self._ready, timeout)
        except (TimeoutError, _Crash) as exc:
            info = exc.info if isinstance(exc, _Crash) else f"no answer within {timeout} s"
            self._teardown()
            tail = self._err_tail.decode("utf-8", "replace").strip()
            raise ExecutorError(
                f"the worker did not start: {info}"
                + (f"\nits stderr ended with:\n{tail}" if tail else "")
            ) from None
        try:
            check_protocol(self._ready.result().get("protocol"))
        except ExecutorError:
            self._teardown()
            raise

    def _on_proto(self) -> None:
        try:
            data = os.read(self._p.from_fd, 1 << 20)
        except OSError:
            data = b""
        if not data:
            self._on_exit()
            return
        try:
            frames = self._buf.feed(data)
            for msg in frames:
                self._on_frame(msg)
        except (ValueError, TypeError, KeyError) as exc:
            # The worker runs untrusted code, which can write to the protocol pipe itself.
            self._fail(f"the worker sent a malformed message ({exc}); it was stopped")

    def _on_frame(self, msg: dict[str, Any]) -> None:
        op = msg.get("op")
        if op == "call":
            assert self._loop is not None
            task = self._loop.create_task(self._serve_call(msg))
            self._calls.add(task)
            task.add_done_callback(self._calls.discard)
        elif op == "done":
            fut = self._pending.pop(int(msg.get("id") or 0), None)
            if fut is not None and not fut.done():
                self._drain_raw()
                fut.set_result(msg.get("result"))
        elif op == "ready" and self._ready is not None and not self._ready.done():
            self._ready.set_result(msg)

    def _on_raw(self, index: int) -> None:
        fd = self._p.out_fd if index == 0 else self._p.err_fd
        try:
            data = os.read(fd, 1 << 16)
        except OSError:
            data = b""
        if not data:
            assert self._loop is not None
            self._loop.remove_reader(fd)
            return
        self._keep_raw(index, data)

    def _keep_raw(self, index: int, data: bytes) -> None:
        if index == 1:
            self._err_tail += data
            del self._err_tail[:-_TAIL]
        if self._raw is not None:
            buf = self._raw[index]
            room = self._ex.max_output - len(buf)
            if room > 0:
                buf += data[:room]

    def _drain_raw(self) -> None:
        """Take fd-level output written before the worker said 'done'."""
        fds = {self._p.out_fd: 0, self._p.err_fd: 1}
        while fds:
            ready, _, _ = select.select(list(fds), [], [], 0)
            if not ready:
                return
            for fd in ready:
                try:
                    data = os.read(fd, 1 << 16)
                except OSError:
                    data = b""
                if data:
                    self._keep_raw(fds[fd], data)
                else:
                    del fds[fd]

    def _on_exit(self) -> None:
        if self._dead:
            return
        code = self._p.proc.poll()
        if code is None and self._pidfd is not None:
            return  # pipe closed by the worker but the process lives on: wait for pidfd
        self._fail(self._ex.describe_exit(code))

    def _fail(self, info: str) -> None:
        if self._dead:
            return
        self._exit_info = info
        self._teardown()
        for fut in [*self._pending.values(), self._ready]:
            if fut is not None and not fut.done():
                fut.set_exception(_Crash(info))
        self._pending.clear()

    def _teardown(self) -> None:
        if self._dead:
            return
        self._dead = True
        loop = self._loop
        if loop is not None:
            for fd in (self._p.from_fd, self._p.out_fd, self._p.err_fd, self._pidfd):
                if fd is not None:
                    loop.remove_reader(fd)
            loop.remove_writer(self._p.to_fd)
        for task in self._calls:
            task.cancel()
        self._p.destroy()
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
        if self._gone is not None:
            settle(self._gone)

    # -- sending ---------------------------------------------------------------------
    def _send(self, msg: dict[str, Any]) -> None:
        if self._dead:
            return
        data = protocol.encode_frame(msg)
        if not self._wbuf:
            try:
                n = os.write(self._p.to_fd, data)
            except BlockingIOError:
                n = 0
            except OSError:
                return  # the worker is gone; the pidfd reader reports it
            if n == len(data):
                return
            data = data[n:]
            assert self._loop is not None
            self._loop.add_writer(self._p.to_fd, self._flush)
        self._wbuf += data

    def _flush(self) -> None:
        try:
            n = os.write(self._p.to_fd, self._wbuf)
        except BlockingIOError:
            return
        except OSError:
            n = len(self._wbuf)
        del self._wbuf[:n]
        if not self._wbuf and self._loop is not None:
            self._loop.remove_writer(self._p.to_fd)

    async def _serve_call(self, msg: dict[str, Any]) -> None:
        cid = msg.get("id")
        try:
            # Params go as sent: the method's table row validates them (codemode.rpc).
            params = msg.get("params")
            value = await self._handler(str(msg.get("method")), {} if params is None else params)
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

    async def _request(self, msg: dict[str, Any]) -> asyncio.Future[Any]:
        if self._dead:
            raise _Crash(self._exit_info or "the worker is not running")
        assert self._loop is not None
        self._seq += 1
        fut = self._loop.create_future()
        self._pending[self._seq] = fut
        self._send({**msg, "id": self._seq})
        return fut

    # -- Worker protocol ------------------------------------------------------------
    async def run(self, code: str, timeout: float) -> ExecutionResult:
        assert self._loop is not None
        start = time.perf_counter()
        self._raw = (bytearray(), bytearray())
        self._timed_out = False
        try:
            fut = await self._request({"op": "run", "code": code})
        except _Crash as exc:
            return self._crash_result(exc.info, start)
        timer = self._timer = RunTimer(self._loop, timeout, lambda: self._on_timeout(fut))
        self._running = fut
        try:
            payload = await fut
        except _Crash as exc:
            if self._timed_out:
                return self._timeout_result(timeout, start, state_lost=True)
            return self._crash_result(exc.info, start)
        finally:
            self._running = None
            timer.cancel()
            self._timer = None
            self._interrupt_timer_cancel()
        raw, self._raw = self._raw, None
        return self._result(payload, raw, timeout, start)

    def hold_timeout(self) -> AbstractContextManager[None]:
        return held(self._timer)

    def _interrupt_timer_cancel(self) -> None:
        if self._grace is not None:
            self._grace.cancel()
            self._grace = None

    def interrupt(self, *, kill_stuck: bool = True) -> bool:
        """Stop the running code as Ctrl-C would (KeyboardInterrupt); with ``kill_stuck``,
        the worker is killed if the code does not stop within the grace period. False when
        nothing is running."""
        fut = self._running
        if fut is None or fut.done() or self._dead:
            return False
        if kill_stuck:
            self._interrupt(fut)
        else:
            with contextlib.suppress(OSError):
                os.write(self._p.ctrl_fd, b"i")
        return True

    def kill(self) -> None:
        """Stop the worker at once (its process group included)."""
        self._fail("the worker was killed")

    def _on_timeout(self, fut: asyncio.Future[Any]) -> None:
        if fut.done() or self._dead:
            return
        self._timed_out = True
        self._interrupt(fut)

    def _interrupt(self, fut: asyncio.Future[Any]) -> None:
        if self._grace is not None:
            return  # already interrupted: the grace period runs
        with contextlib.suppress(OSError):
            os.write(self._p.ctrl_fd, b"i")
        assert self._loop is not None
        self._grace = self._loop.call_later(self._ex.interrupt_grace, self._kill_stuck, fut)

    def _kill_stuck(self, fut: asyncio.Future[Any]) -> None:
        if not fut.done():
            self._fail("the run did not stop when interrupted; the worker was killed")

    def stop_run(self, reason: str) -> None:
        """Interrupt the running code for a host-side limit other than the timeout; kill
        the worker with ``reason`` if it has not stopped within the grace period."""
        if self._dead or not self._pending:
            return
        with contextlib.suppress(OSError):
            os.write(self._p.ctrl_fd, b"i")
        assert self._loop is not None
        pending = list(self._pending.values())

        def kill_if_stuck() -> None:
            if any(not f.done() for f in pending):
                self._fail(reason)

        self._loop.call_later(self._ex.interrupt_grace, kill_if_stuck)

    def _result(
        self, payload: Any, raw: tuple[bytearray, bytearray] | None, timeout: float, start: float
    ) -> ExecutionResult:
        if not isinstance(payload, dict):
            if self._timed_out:
                return self._timeout_result(timeout, start, state_lost=False)
            return ExecutionResult(
                error=ErrorInfo("WorkerError", "the worker returned no result"),
                duration_ms=(time.perf_counter() - start) * 1000,
            )
        res = ExecutionResult.from_payload(payload, (time.perf_counter() - start) * 1000)
        changes: dict[str, Any] = {}
        if raw is not None:
            for name, data in zip(("stdout", "stderr"), raw, strict=True):
                if data:
                    changes[name] = getattr(res, name) + data.decode("utf-8", "replace")
                    if len(data) >= self._ex.max_output:
                        changes[f"{name}_truncated"] = True
        error = res.error
        if self._timed_out:
            changes["timed_out"] = True
            changes["error"] = timeout_error(
                timeout,
                traceback=error.traceback if error else "",
                lineno=error.lineno if error else None,
            )
        elif error is not None and error.type == "MemoryError" and self._ex.memory_limit_mb:
            limit = f"the worker's memory limit ({self._ex.memory_limit_mb} MB) was reached"
            changes["error"] = replace(
                error, message=limit + (f": {error.message}" if error.message else "")
            )
        return replace(res, **changes) if changes else res

    def _timeout_result(self, timeout: float, start: float, *, state_lost: bool) -> ExecutionResult:
        return ExecutionResult(
            error=timeout_error(timeout, state_lost=state_lost),
            timed_out=True,
            state_lost=state_lost,
            duration_ms=(time.perf_counter() - start) * 1000,
        )

    def _crash_result(self, info: str, start: float) -> ExecutionResult:
        tail = self._err_tail.decode("utf-8", "replace").strip()
        msg = info + "; the session's state was lost and the next run starts a fresh worker"
        if len(tail) > 1500:
            # The interpreter's own verdict ("Fatal Python error: ...") heads its dump: keep it.
            fatal = next((ln for ln in tail.splitlines() if ln.startswith("Fatal Python")), "")
            if fatal and fatal not in tail[-1500:]:
                msg += f"\n{fatal}"
            msg += f"\nthe last 1,500 characters of the worker's stderr:\n{tail[-1500:]}"
        elif tail:
            msg += f"\nthe worker's stderr ended with:\n{tail}"
        return ExecutionResult(
            error=ErrorInfo("WorkerCrashed", msg),
            state_lost=True,
            duration_ms=(time.perf_counter() - start) * 1000,
        )

    async def reset(self) -> None:
        try:
            fut = await self._request({"op": "reset"})
            await asyncio.wait_for(fut, 10)
        except (TimeoutError, _Crash):
            self._fail("the worker did not reset")
            raise ExecutorError("the worker did not answer a reset; it was stopped") from None

    async def close(self) -> None:
        if self._dead:
            return
        self._send({"op": "shutdown"})
        if self._gone is not None and self._pidfd is not None:
            # The pidfd (or EOF) reader tears the worker down as soon as it exits.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._gone), 0.5)
        self._teardown()
