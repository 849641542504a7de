"""The worker -> host methods, declared once: name, params model, result, handler, description.

A ``Method`` is one row of the table. From the rows derive: the host's dispatcher
(``Table.install`` registers each method on a ``HostAPI``), the MCP memory tools and the
``codemode`` CLI commands (their parameters are the params model's fields), and the docs.
The worker's namespaces (``codemode_worker``, standard library only) cannot import
pydantic; ``tests/test_rpc.py`` reads their source and checks that every call they make
names a method of the table with parameters its model accepts.

Params are validated at the boundary, strictly (no ``"5"`` for an int, no unknown keys):
data from the worker is untrusted. A malformed call becomes the method's ``error`` class
(``ValidationError``, ``ToolArgumentError``) naming the method and the field, which the
agent's code receives as an exception; it never reaches the host as an unhandled error.

The rows live beside their handlers: ``codemode.tools.rpc`` (``tools.*``) and
``codemode.memory.rpc`` (``skills.*``, ``artifacts.*``, ``state.*``, ``deps.*``),
``codemode.live_rpc`` (``output.write``), ``codemode.checkpoint.store`` (``checkpoint.*``);
``methods()`` is the whole table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticError

from .errors import CodemodeError, ValidationError

if TYPE_CHECKING:
    from .hostapi import HostAPI

T = TypeVar("T")
MAX_SHOWN = 60


class Params(BaseModel):
    """Base of every params model: strict types, no unknown keys, immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


@dataclass(frozen=True)
class Method(Generic[T]):
    """One worker -> host method; ``handler(target, params)`` does the work."""

    name: str
    params: type[Params]
    handler: Callable[[T, Any], Awaitable[Any]]
    result: str
    description: str
    error: type[CodemodeError] = ValidationError

    def parse(self, raw: Mapping[str, Any]) -> Any:
        """``raw`` as this method's params model, or ``error`` naming every problem."""
        if not isinstance(raw, Mapping):
            raise self.error(f"{self.name}: parameters must be an object")
        try:
            return self.params.model_validate(raw)
        except PydanticError as exc:
            raise self.error(f"{self.name}: {describe(exc)}") from None

    async def call(self, target: T, raw: Mapping[str, Any]) -> Any:
        return await self.handler(target, self.parse(raw))


def describe(exc: PydanticError) -> str:
    """One line per problem: ``version: Input should be a valid integer (got '../x')``."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ())) or "parameters"
        if err["type"] == "extra_forbidden":
            parts.append(f"unexpected argument {where!r}")
        elif err["type"] == "missing":
            parts.append(f"missing argument {where!r}")
        else:
            shown = repr(err.get("input"))
            if len(shown) > MAX_SHOWN:
                shown = shown[: MAX_SHOWN - 3] + "..."
            parts.append(f"{where}: {err['msg']} (got {shown})")
    return "; ".join(parts)


class Table(Generic[T]):
    """Rows for one target object (the tool registry, the memory)."""

    def __init__(self, *methods: Method[T]) -> None:
        self._methods = {m.name: m for m in methods}
        if len(self._methods) != len(methods):
            raise ValueError("a method is declared twice")

    def __getitem__(self, name: str) -> Method[T]:
        return self._methods[name]

    def __iter__(self) -> Iterator[Method[T]]:
        return iter(self._methods.values())

    def __contains__(self, name: object) -> bool:
        return name in self._methods

    def install(self, host: HostAPI, target: T) -> None:
        """Serve every method on ``host`` for ``target``, validating params first."""
        for method in self._methods.values():
            host.register(method.name, _bound(method, target))


def _bound(method: Method[T], target: T) -> Callable[[dict[str, Any]], Awaitable[Any]]:
    async def handle(params: dict[str, Any]) -> Any:
        return await method.handler(target, method.parse(params))

    return handle


def methods() -> dict[str, Method[Any]]:
    """The whole table: every method the worker may call, by name."""
    from .checkpoint.store import CHECKPOINT_METHODS
    from .live_rpc import OUTPUT_METHODS
    from .memory.rpc import MEMORY_METHODS
    from .tools.rpc import TOOL_METHODS

    tables = (TOOL_METHODS, MEMORY_METHODS, OUTPUT_METHODS, CHECKPOINT_METHODS)
    return {m.name: m for table in tables for m in table}


__all__ = ["Method", "Params", "Table", "describe", "methods"]
