"""Executors: where the agent's code runs. Chosen by the user, behind one protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import CallHandler, Executor, Worker
from .inprocess import InProcessExecutor
from .pool import close_pools
from .spawn import LaunchSpec
from .subprocess import SubprocessExecutor

if TYPE_CHECKING:
    from ..workspace import Workspace

EXECUTOR_NAMES = ("inprocess", "subprocess", "sandbox", "ray")


def executor_by_name(name: str, *, workspace: Workspace | None = None, **options: Any) -> Executor:
    """Build an executor from its CLI/config name."""
    if name == "inprocess":
        return InProcessExecutor(**options)
    if name == "subprocess":
        if workspace is not None:
            workspace.files_dir.mkdir(parents=True, exist_ok=True)
            options.setdefault("cwd", str(workspace.files_dir))
            options.setdefault("deps_dir", str(workspace.deps_dir))
        return SubprocessExecutor(**options)
    if name == "sandbox":
        from .sandbox import SandboxExecutor

        return SandboxExecutor.for_workspace(workspace, **options)
    if name == "ray":
        from ..cluster.executor import RayExecutor

        return RayExecutor.for_workspace(workspace, **options)
    from ..errors import ConfigError
    from ..plugins import executor_factory, names

    factory = executor_factory(name)
    if factory is not None:
        if options:
            raise ConfigError(f"executor {name!r} comes from a plugin and takes no options here")
        return factory(workspace)
    known = ", ".join([*EXECUTOR_NAMES, *names("executors")])
    raise ConfigError(f"unknown executor {name!r}; choose one of {known}")


def default_executor(*, workspace: Workspace | None = None) -> Executor:
    """The executor used when none is given: the workspace's ``executor`` setting
    (``CODEMODE_EXECUTOR``), which defaults to the sandbox. A sandbox that cannot start
    refuses with the reason and the fix; it never silently runs code unsandboxed."""
    name = workspace.settings.executor if workspace is not None else "sandbox"
    return executor_by_name(name, workspace=workspace)


__all__ = [
    "EXECUTOR_NAMES",
    "CallHandler",
    "Executor",
    "InProcessExecutor",
    "LaunchSpec",
    "SubprocessExecutor",
    "Worker",
    "close_pools",
    "default_executor",
    "executor_by_name",
]
