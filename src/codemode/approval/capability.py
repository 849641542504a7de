"""Approval as a capability: the ``"approval"`` config section and the ``approval`` stage."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..capability import Capability
from .config import ApprovalConfig

if TYPE_CHECKING:
    from ..tools.registry import Middleware


def _layers(config: ApprovalConfig) -> Iterator[tuple[str, Middleware]]:
    from .layer import Approvals, approval_layer

    yield "approval", approval_layer(Approvals(config))


APPROVAL = Capability(name="approval", config=ApprovalConfig, strict_keys=True, tool_layers=_layers)
