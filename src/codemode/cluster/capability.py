"""The ``ray`` config section, as a capability with nothing else to plug in: the executor
itself is chosen by the ``executor`` setting (``codemode.execution.executor_by_name``)."""

from __future__ import annotations

from ..capability import Capability
from .config import RayConfig

RAY: Capability[RayConfig] = Capability(name="ray", config=RayConfig)
