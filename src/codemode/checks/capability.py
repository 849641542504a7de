"""Code checks as a capability: the ``"code_checks"`` config section and the ``checks``
stage of the run chain."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..capability import Capability
from .config import CodeChecksConfig

if TYPE_CHECKING:
    from ..chain import RunHook
    from .scan import Checker


def _hooks(config: CodeChecksConfig) -> Iterator[tuple[str, RunHook]]:
    if config.mode != "off":
        from .hook import checks_hook

        yield "checks", checks_hook(_checker(config), config.mode)


@functools.lru_cache(maxsize=16)
def _checker(config: CodeChecksConfig) -> Checker:
    """One checker per configuration (frozen, so hashable), shared by every session: it
    is read-only but for its cache of scanned cells, and building it (its rules compiled
    into expressions) was a third of the server's work to start a session."""
    from .scan import Checker

    return Checker(config)


CODE_CHECKS = Capability(
    name="code_checks", config=CodeChecksConfig, strict_keys=True, run_hooks=_hooks
)
