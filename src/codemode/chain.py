"""The two chains everything passes through, and the one place their order is written.

Every tool call goes through ``ToolRegistry``'s chain and every run through ``Session``'s.
A layer is ``layer(event, call_next)``: it may look at the event, change it, refuse it
(raise, or for a run return a result without calling ``call_next``), and post-process
what comes back. Layers are placed by *stage*, never by the order code happens to add
them; within one stage the first added runs outermost.

Tool calls, outermost first (``TOOL_STAGES``)::

    observe   metrics, tracing: sees everything, including refusals below
    audit     records what was asked and what came back (tokenized values only); privacy
              gives the layers inside ``ToolCall.revealed()`` here (the real arguments)
    policy    allow/deny by tool, tenant, arguments (as the tool will receive them)
    approval  asks a human before destructive calls
    budget    counts calls, time, cost per tenant/session
    custom    ``registry.use(layer)`` without a stage
    privacy   restores tokens in the arguments on the way in, tokenizes the result out
    validate  the arguments against the tool's input schema (after every rewrite)
    -> upstream (the tool's source: MCP server, Python callable) and result conversion

Runs, outermost first (``RUN_STAGES``)::

    observe -> audit -> budget -> checks -> custom -> privacy -> the worker runs the code

A layer that only looks (metrics, tracing) may be a :class:`Watch`: outermost in its chain,
it is called before and after the rest from the chain's own frame, not as a coroutine
wrapped around it, so it costs no frame resumed at every await of the call.

This module knows no layer by name; capabilities (``codemode.capabilities``) add theirs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .context import CallContext
from .errors import ConfigError
from .result import ExecutionResult

TOOL_STAGES: tuple[str, ...] = (
    "observe",
    "audit",
    "policy",
    "approval",
    "budget",
    "custom",
    "privacy",
    "validate",
)
"""Stages of the tool-call chain, outermost first; the upstream call is innermost."""

RUN_STAGES: tuple[str, ...] = ("observe", "audit", "budget", "checks", "custom", "privacy")
"""Stages of the run chain, outermost first; the worker's run is innermost."""

DEFAULT_STAGE = "custom"

E = TypeVar("E")
R = TypeVar("R")

Next = Callable[[E], Awaitable[R]]
Layer = Callable[[E, Next[E, R]], Awaitable[R]]


class Chain(Generic[E, R]):
    """Layers around a terminal call, ordered by stage; rebuilt when a layer is added."""

    def __init__(self, kind: str, stages: tuple[str, ...], terminal: Next[E, R]) -> None:
        self.kind = kind
        self.stages = stages
        self._rank = {s: i for i, s in enumerate(stages)}
        self._terminal = terminal
        self._layers: list[tuple[int, int, str, Layer[E, R]]] = []
        self._call: Next[E, R] = terminal
        self._watch: Watch[E, R] | None = None

    def use(self, layer: Layer[E, R], stage: str = DEFAULT_STAGE) -> None:
        """Add ``layer`` at ``stage`` (after the layers already at that stage)."""
        rank = self._rank.get(stage)
        if rank is None:
            raise ConfigError(
                f"unknown {self.kind} stage {stage!r}; stages, outermost first: "
                + ", ".join(self.stages)
            )
        self._layers.append((rank, len(self._layers), stage, layer))
        self._layers.sort(key=lambda item: (item[0], item[1]))
        layers = [each for _, _, _, each in self._layers]
        # The outermost layer, when it only looks, runs from __call__'s frame.
        outer = layers[0] if layers else None
        self._watch = outer if isinstance(outer, Watch) else None
        if self._watch is not None:
            del layers[0]
        handler = self._terminal
        for each in reversed(layers):
            handler = _bind(each, handler)
        self._call = handler

    def layers(self) -> list[tuple[str, Layer[E, R]]]:
        """(stage, layer), outermost first."""
        return [(stage, layer) for _, _, stage, layer in self._layers]

    async def __call__(self, event: E) -> R:
        watch = self._watch
        if watch is None:
            return await self._call(event)
        state = watch.start(event)
        if state is AROUND:
            return await watch.around(event, self._call)
        try:
            result = await self._call(event)
        except BaseException as exc:
            watch.raised(state, event, exc)
            raise
        watch.returned(state, event, result)
        return result


def _bind(layer: Layer[E, R], nxt: Next[E, R]) -> Next[E, R]:
    # A plain function handing back the layer's awaitable: no coroutine of its own per
    # call and layer (observability's budget is a few microseconds per call).
    def handler(event: E) -> Awaitable[R]:
        return layer(event, nxt)

    return handler


AROUND: Any = object()
"""What ``Watch.start`` returns for an event it must wrap as a layer (``Watch.around``)."""


class Watch(Generic[E, R]):
    """A layer that looks at an event and what comes back, never changing either: plain
    calls before and after the layers inside it. Outermost in a chain (``Chain.use``) it
    runs from the chain's frame; elsewhere it is called as any layer.

    Why: a layer's coroutine is one more frame resumed at every await of every call
    (an upstream call awaits several times), which cost observability more than its
    own code did."""

    @property
    def __name__(self) -> str:  # listed beside function layers (``ToolRegistry.layers``)
        name: str = type(self).__qualname__
        return name

    def start(self, event: E) -> Any:
        """Before the layers inside: returns what ``returned``/``raised`` are handed, or
        ``AROUND`` for the chain to await ``around`` instead."""
        raise NotImplementedError

    def returned(self, state: Any, event: E, result: R) -> None:
        raise NotImplementedError

    def raised(self, state: Any, event: E, exc: BaseException) -> None:
        """The layers inside raised ``exc`` (the chain raises it on)."""
        raise NotImplementedError

    def around(self, event: E, call_next: Next[E, R]) -> Awaitable[R]:
        """The rare event ``start`` hands back (``AROUND``), as a layer would treat it."""
        return call_next(event)

    async def __call__(self, event: E, call_next: Next[E, R]) -> R:
        state = self.start(event)
        if state is AROUND:
            return await self.around(event, call_next)
        try:
            result = await call_next(event)
        except BaseException as exc:
            self.raised(state, event, exc)
            raise
        self.returned(state, event, result)
        return result


@dataclass(slots=True)
class RunEvent:
    """One run as run hooks see it; a hook may replace ``code`` or ``timeout``, or wrap
    ``on_output`` (e.g. to filter what is streamed)."""

    code: str
    timeout: float
    context: CallContext
    on_output: Callable[[str, str], Any] | None = None
    """Called with ``(stream, text)`` as the run prints (``codemode.live``)."""


NextRun = Next[RunEvent, ExecutionResult]
RunHook = Layer[RunEvent, ExecutionResult]
"""``hook(event, call_next) -> ExecutionResult``: around one ``Session.run``."""


__all__ = [
    "AROUND",
    "DEFAULT_STAGE",
    "RUN_STAGES",
    "TOOL_STAGES",
    "Chain",
    "Layer",
    "Next",
    "NextRun",
    "RunEvent",
    "RunHook",
    "Watch",
]
