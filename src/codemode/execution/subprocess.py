"""One persistent worker process per session, talking framed JSON over pipes.

The host side is asyncio with raw fds (``add_reader``, non-blocking writes): a run costs
two pipe hops and no thread hand-offs. Process exit is watched with a pidfd, so a worker
that dies while a forked child still holds its pipes is noticed at once.

This module launches workers (command line, environment, warm pool); the host side of
a running one (frames, the run in progress, its end) is :mod:`.worker_host`. The worker
runs the agent's code, so nothing from it is trusted. Starting and reaping workers
happen on threads (:mod:`.spawn`).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import sysconfig
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import codemode_worker

from ..errors import ExecutorError
from ..observability import signals
from .base import CallHandler
from .frames import FrameLimits, load_schema, schema_loaded
from .pool import get_pool
from .spawn import (
    LaunchSpec,
    Spawned,
    background_prefix,
    boot_gate,
    describe_exit,
    in_background,
    off_loop,
    pipe,
    raise_open_files_limit,
)
from .worker_host import SubprocessWorker

WORKER_ROOT = str(Path(codemode_worker.__file__).resolve().parent.parent)
BOOTSTRAP = (
    "import sys,json;c=json.loads(sys.argv[1]);sys.path.insert(0,c['root']);"
    "from codemode_worker.main import main;main(c)"
)
DEFAULT_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


class SubprocessExecutor:
    """Runs each session's code in its own persistent Python process.

    Not a security boundary by itself (the process has the host user's rights): use
    ``SandboxExecutor`` for untrusted code. The worker gets a cleared environment.

    Bounds on what one worker can make the host hold: ``max_frame_mb`` for the data of
    one call it makes, ``max_queued_mb`` for replies queued and not read yet,
    ``max_calls`` calls served at once (its pipe is not read meanwhile).
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
        max_queued_mb: int = 256,
        max_calls: int = 256,
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
        self.frame_limits = FrameLimits.for_output(max_output, max_frame_mb << 20)
        self.max_queued = max_queued_mb << 20
        self.max_calls = max_calls
        raise_open_files_limit()  # hundreds of sessions hold thousands of pipes

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
            "frame_limits": self.frame_limits.for_worker(),
        }

    def launch_spec(self, config: dict[str, Any], *, background: bool = False) -> LaunchSpec:
        """The command for one worker; override to wrap it (see SandboxExecutor).
        ``background``: it is started ahead of demand (see :func:`.spawn.in_background`)."""
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

    def spawn(self, *, background: bool = False) -> Spawned:
        """Start one worker process (blocking: called on a start thread, see :mod:`.spawn`).

        ``background``: ahead of demand (a warm pool's refill), at a low CPU priority
        until a session takes it (``Spawned.boost``)."""
        out_r, out_w = pipe()
        ctrl_r, ctrl_w = pipe()
        config = {**self.worker_config(), "out_fd": out_w, "ctrl_fd": ctrl_r}
        background = background and bool(background_prefix())
        try:
            spec = self.launch_spec(config, background=background)
        except BaseException:
            for fd in (out_r, out_w, ctrl_r, ctrl_w):
                os.close(fd)
            raise
        prefix = background_prefix() if background else []
        try:
            proc = subprocess.Popen(
                [*prefix, *spec.argv],
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
        for fd in (from_fd, ctrl_w):
            os.set_blocking(fd, False)  # a worker that stops reading never blocks the host
        return Spawned(
            proc,
            to_fd,
            from_fd,
            err_fd,
            out_r,
            ctrl_w,
            spec.cleanup,
            workspace=spec.workspace,
            foreground=in_background(proc, spec) if prefix else None,
        )

    # -- Executor protocol -------------------------------------------------------
    async def prepare(self) -> None:
        """One-off checks before the first start (the sandbox runs its probe here)."""

    async def start(self, handler: CallHandler) -> SubprocessWorker:
        began = time.perf_counter()
        await self.prepare()
        if not schema_loaded():
            await off_loop(load_schema)  # pydantic, once per process
        pool = get_pool(self.pool_key(), self.spawn, self.pool_size)
        spawned = pool.take()
        source = "pool" if spawned is not None else "spawn"
        # Only a cold start waits at the gate: a warm worker has booted already.
        gate = boot_gate() if spawned is None else contextlib.nullcontext()
        try:
            async with gate:
                if spawned is None:
                    spawned = await off_loop(self.spawn, orphan=Spawned.destroy)
                worker = SubprocessWorker(self, spawned, handler)
                await worker.attach(self.start_timeout)
            try:
                spawned.boost(last=True)
            except OSError as exc:
                await worker.close()
                raise ExecutorError(f"the worker could not join its cpu cgroup: {exc}") from exc
        finally:
            pool.refill()  # in the background, once this start is done
        signals.worker_acquired(time.perf_counter() - began, source)
        return worker

    async def warm(self, count: int | None = None) -> None:
        """Fill the warm pool (to ``count`` workers if given) and wait until it is full."""
        await self.prepare()
        if not schema_loaded():
            await off_loop(load_schema)  # now, rather than in the first session's start
        await get_pool(self.pool_key(), self.spawn, self.pool_size).fill(count)
