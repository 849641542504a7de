"""Code checks as a capability: the ``"code_checks"`` config section and the ``checks``
stage of the run chain."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..capability import Capability
from .config import CodeChecksConfig

if TYPE_CHECKING:
    from ..chain import RunHook


def _hooks(config: CodeChecksConfig) -> Iterator[tuple[str, RunHook]]:
    if config.mode != "off":
        from .hook import checks_hook
        from .scan import Checker

        yield "checks", checks_hook(Checker(config), config.mode)


CODE_CHECKS = Capability(
    name="code_checks", config=CodeChecksConfig, strict_keys=True, run_hooks=_hooks
)
