"""Which executor ``codemode serve`` runs agents' code in, and starting it warm."""

from __future__ import annotations

from typing import TYPE_CHECKING

from codemode.errors import ConfigError, ExecutorError

if TYPE_CHECKING:
    from codemode.execution.base import Executor
    from codemode.workspace import Workspace


def choose_executor(name: str | None) -> str | None:
    """``--executor`` as given; None means the workspace's ``executor`` setting."""
    return name


async def start_executor(
    name: str | None, workspace: Workspace, *, chosen: bool, pool_size: int | None = None
) -> tuple[str, Executor]:
    """Build and warm the executor (``name``, or the workspace's setting: the sandbox by
    default). A sandbox that cannot start refuses with the reason and the fix; codemode
    never falls back to running agents' code unsandboxed on its own. ``pool_size`` is
    how many workers are kept pre-started (the executor's default when None)."""
    if name is None:
        name = workspace.settings.executor
    try:
        executor = make_executor(name, workspace, pool_size=pool_size)
        warm = getattr(executor, "warm", None)
        if warm is not None:
            await warm()
    except (ExecutorError, ConfigError) as exc:
        if name == "sandbox" and not chosen:
            raise ExecutorError(
                f"{exc}\nTo run agents' code without the sandbox (NOT a security boundary), "
                "choose it explicitly: --executor subprocess, or CODEMODE_EXECUTOR=subprocess."
            ) from exc
        raise
    return name, executor


def make_executor(name: str, workspace: Workspace, *, pool_size: int | None = None) -> Executor:
    from codemode.execution import executor_by_name

    options = {} if pool_size is None or name == "inprocess" else {"pool_size": pool_size}
    return executor_by_name(name, workspace=workspace, **options)
