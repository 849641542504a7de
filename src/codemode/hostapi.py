"""Routes calls made by the agent's code (inside the worker) to host-side handlers.

Tools, skills, artifacts and state each register their methods here; executors only
deliver ``(method, params)`` and send back the answer or the error.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, TypeVar

from .errors import CodemodeError, RelayedCallError

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
HostLayer = Callable[[str, dict[str, Any], Handler], Awaitable[Any]]
"""``layer(method, params, call_next)``: around every call the worker makes (metrics and
spans of memory operations); ``call_next(params)`` runs the method."""

L = TypeVar("L", bound=Callable[..., Any])

log = logging.getLogger("codemode.host")

_HIDDEN = frozenset({"args", "with_traceback", "add_note"})

call_warnings: ContextVar[list[str] | None] = ContextVar("codemode_call_warnings", default=None)
"""Where handlers note warnings for the run that made the call (set per call by Session)."""


def warn_caller(message: str) -> None:
    """Tell the run that made the current call (it shows in ``ExecutionResult.warnings``)."""
    sink = call_warnings.get()
    if sink is not None and message not in sink:
        sink.append(message)


def for_methods(accepts: Callable[[str], bool]) -> Callable[[L], L]:
    """Declare that a host layer wraps only the methods ``accepts`` takes: the others
    (tool calls, most of the time) do not pass through it at all."""

    def mark(layer: L) -> L:
        layer.host_methods = accepts  # type: ignore[attr-defined]
        return layer

    return mark


class HostAPI:
    """A table of ``method -> async handler``."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self._layers: list[tuple[HostLayer, Callable[[str], bool] | None]] = []
        self._chains: dict[str, Handler] = {}  # method -> handler inside its layers

    def use(self, layer: HostLayer) -> None:
        """Wrap every call in ``layer`` (or only the methods it was declared for, see
        ``for_methods``); the first added runs outermost."""
        self._layers.append((layer, getattr(layer, "host_methods", None)))
        self._chains.clear()

    def register(self, method: str, handler: Handler) -> None:
        self._handlers[method] = handler
        self._chains.pop(method, None)

    def handler(self, method: str) -> Handler | None:
        """The handler registered for ``method`` (to wrap it), or None."""
        return self._handlers.get(method)

    def methods(self) -> list[str]:
        return sorted(self._handlers)

    async def dispatch(self, method: str, params: dict[str, Any]) -> Any:
        handler = self._chains.get(method)
        if handler is None:
            handler = self._handlers.get(method)
            if handler is None:
                area = method.partition(".")[0]
                raise CodemodeError(
                    f"{method!r} is not available in this session (no {area} are configured for it)"
                )
            for layer, accepts in reversed(self._layers):
                if accepts is None or accepts(method):
                    handler = _wrapped(layer, method, handler)
            self._chains[method] = handler
        return await handler(params)


def _wrapped(layer: HostLayer, method: str, inner: Handler) -> Handler:
    def call(params: dict[str, Any]) -> Awaitable[Any]:
        return layer(method, params, inner)

    return call


def error_to_wire(exc: BaseException) -> dict[str, Any]:
    """Describe a host-side error for the worker, which re-raises it by class name."""
    if isinstance(exc, RelayedCallError):
        return dict(exc.wire)
    if isinstance(exc, CodemodeError):
        # ``message`` without the "server.tool: " prefix: the worker-side class adds it back.
        wire: dict[str, Any] = {
            "type": type(exc).__name__,
            "message": str(getattr(exc, "message", "") or exc),
        }
        for key, val in vars(exc).items():
            if key.startswith("_") or key in _HIDDEN or key == "message":
                continue
            if isinstance(val, str | int | float | bool | list | type(None)):
                wire[key] = val
        return wire
    # Not codemode's own error: its text may name host paths or hold secrets (a driver's
    # connection string, a plugin's bug quoting its config). The code gets the type and a
    # reference; the host's log has the whole text under the same reference.
    ref = secrets.token_hex(4)
    log.error("host handler failed (reference %s)", ref, exc_info=exc)
    return {
        "type": "HostError",
        "message": (
            f"the host failed handling this call ({type(exc).__name__}); "
            f"its log has the details under reference {ref}"
        ),
        "reference": ref,
    }
