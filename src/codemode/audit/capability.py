"""The audit log as a capability: the ``"audit"`` config section, the ``audit`` stages of
both chains, a watcher of memory writes, and ``codemode audit``."""

from __future__ import annotations

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
    commands={"audit": "Read and verify the audit log (tail, search, verify, keygen)."},
    command=_command,
)
