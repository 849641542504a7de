"""Budgets as a capability: the ``"budget"`` config section and the ``budget`` stages of the
tool-call and run chains (sharing one ledger per configuration)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING

from ..capability import Capability
from .config import BudgetConfig

if TYPE_CHECKING:
    from ..chain import RunHook
    from ..tools.registry import Middleware
    from .ledger import Ledger


@lru_cache(maxsize=64)
def _ledger(config: BudgetConfig) -> Ledger:
    """One ledger per configuration: the registry's tool layer and every session's run
    hook must count into the same accounts."""
    from .ledger import Ledger

    return Ledger(config)


def _layers(config: BudgetConfig) -> Iterator[tuple[str, Middleware]]:
    # Installed for run limits too: it notes the time calls spent waiting for a person.
    if config.run.active or config.session.active:
        from .layers import tool_layer

        yield "budget", tool_layer(_ledger(config))


def _hooks(config: BudgetConfig) -> Iterator[tuple[str, RunHook]]:
    if config.run.active or config.session.active:
        from .layers import run_hook

        yield "budget", run_hook(_ledger(config))


BUDGET = Capability(
    name="budget", config=BudgetConfig, strict_keys=True, tool_layers=_layers, run_hooks=_hooks
)
