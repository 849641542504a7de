"""Checkpoints as a capability: its config section, and the sessions it equips."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..capability import Capability
from .config import CheckpointConfig

if TYPE_CHECKING:
    import click

    from ..session import Session


def _setup(config: CheckpointConfig, session: Session) -> None:
    if not config.auto or session.checkpoints is not None or session.memory is None:
        return
    from .store import Checkpoints

    session.use_checkpoints(
        Checkpoints.for_context(
            session.memory.storage,
            session.context,
            max_bytes=config.max_mb << 20,
            timeout=config.timeout,
            keep_seconds=config.keep_hours * 3600 or None,
        )
    )


def _command(name: str) -> click.Command:
    from .cli import checkpoints

    return checkpoints


CHECKPOINT: Capability[CheckpointConfig] = Capability(
    name="checkpoint",
    config=CheckpointConfig,
    strict_keys=True,
    session_setup=_setup,
    commands={"checkpoints": "List and delete sessions' saved variables."},
    command=_command,
)
