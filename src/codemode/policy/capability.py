"""Tool policy as a capability: the ``"policy"`` config section, the ``policy`` stage of the
tool-call chain, and the filter that hides denied tools from discovery."""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING

from ..capability import Capability
from .rules import Policy, PolicyConfig

if TYPE_CHECKING:
    from ..tools.registry import Middleware, ToolFilter


@lru_cache(maxsize=64)
def _policy(config: PolicyConfig) -> Policy:
    """One ``Policy`` (and decision cache) per configuration, shared by layer and filter."""
    return Policy(config)


def _layers(config: PolicyConfig) -> Iterator[tuple[str, Middleware]]:
    if config.active:
        from .layer import policy_layer

        yield "policy", policy_layer(_policy(config))


def _hidden(config: PolicyConfig) -> ToolFilter | None:
    if not (config.active and config.hide_denied):
        return None
    from .layer import hidden_filter

    return hidden_filter(_policy(config))


POLICY = Capability(
    name="policy",
    config=PolicyConfig,
    strict_keys=True,
    tool_layers=_layers,
    hidden_tools=_hidden,
)
