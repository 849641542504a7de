"""The audit log as a capability: the ``"audit"`` config section, the ``audit`` stages of
both chains, a watcher of memory writes, and ``codemode audit``."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..capability import Capability
from .config import AuditConfig

if TYPE_CHECKING:
    import click

    from ..chain import RunHook
    from ..memory.events import MemoryWatcher
    from ..tools.registry import Middleware
    from .trail import Trail


@lru_cache(maxsize=64)
def trail_for(config: AuditConfig) -> Trail:
    """One trail (key, open logs) per configuration, shared by all three recorders."""
    from .trail import Trail

    return Trail(config)


def _layers(config: AuditConfig) -> Iterator[tuple[str, Middleware]]:
    if config.enabled:
        from .trail import tool_layer

        yield "audit", tool_layer(trail_for(config))


def _hooks(config: AuditConfig) -> Iterator[tuple[str, RunHook]]:
    if config.enabled:
        from .trail import run_hook

        yield "audit", run_hook(trail_for(config))


def _watchers(config: AuditConfig) -> Iterator[MemoryWatcher]:
    if config.enabled:
        from .trail import memory_watcher

        yield memory_watcher(trail_for(config))


def _private(config: AuditConfig, workspace: Path) -> Iterator[Path]:
    """Its key file, head file, and the directory of a log kept outside the workspace (the
    rotated files sit beside it): a server that could read them could forge the chain."""
    from .trail import log_path

    for name in (config.key_file, config.head_file):
        if name:
            yield Path(name).expanduser()
    log = log_path(config, str(workspace))
    if not log.resolve().is_relative_to(workspace.resolve()):
        yield log.parent


def _make_private(config: AuditConfig, workspace: Path) -> None:
    """The log's directory (0700) and a custom head file (empty, 0600: no head yet), which the
    first write would make: a server started before it could make them as its own."""
    if not config.enabled:
        return
    from .trail import head_path, log_path

    log = log_path(config, str(workspace))
    if not log.resolve().is_relative_to(workspace.resolve()):  # the workspace is hidden whole
        os.makedirs(log.parent, mode=0o700, exist_ok=True)
    if config.head_file:
        head = head_path(config, log)
        if not os.path.lexists(head):
            # 0755: bwrap, as the server's uid, must reach the file to show it empty
            os.makedirs(head.parent, mode=0o755, exist_ok=True)
            with contextlib.suppress(FileExistsError):  # another process made it meanwhile
                os.close(os.open(head, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _command(name: str) -> click.Command:
    from .cli import audit

    return audit


AUDIT = Capability(
    name="audit",
    config=AuditConfig,
    strict_keys=True,
    tool_layers=_layers,
    run_hooks=_hooks,
    memory_watchers=_watchers,
    private_paths=_private,
    make_private=_make_private,
    commands={"audit": "Read and verify the audit log (tail, search, verify, keygen)."},
    command=_command,
)
