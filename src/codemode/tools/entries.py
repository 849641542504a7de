"""The registry's records of servers and tools, and how their Python names are chosen.

``ToolEntry`` compiles its argument and output validators and renders its signature on
first use, so listing 10,000 tools costs nothing until some are called or shown.
"""

from __future__ import annotations

import asyncio
import inspect
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codemode.tools import stubs
from codemode.tools.search import ToolDoc
from codemode.tools.spec import ToolSource, ToolSpec, py_identifier
from codemode.tools.validate import ArgumentValidator, Uncheckable, compile_schema

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

_UNSET: Any = object()


def assign_names(names: Iterable[str], reserved: frozenset[str] = frozenset()) -> dict[str, str]:
    """original -> unique Python identifier; collisions get ``_2``, ``_3``... predictably."""
    groups: dict[str, list[str]] = {}
    for n in names:
        base = py_identifier(n)
        if base in reserved:
            base += "_"
        groups.setdefault(base, []).append(n)
    used = set(groups)
    out: dict[str, str] = {}
    for base in sorted(groups):
        members = sorted(set(groups[base]), key=lambda n: (n != base, n))
        out[members[0]] = base
        for m in members[1:]:
            i = 2
            while f"{base}_{i}" in used:
                i += 1
            used.add(f"{base}_{i}")
            out[m] = f"{base}_{i}"
    return out


@dataclass(slots=True)
class ToolEntry:
    spec: ToolSpec
    server: ServerEntry
    py_name: str
    _validator: ArgumentValidator | None = None
    _output: Any = _UNSET
    _signature: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.server.py_name}.{self.py_name}"

    @property
    def validator(self) -> ArgumentValidator:
        # Compiled on first use, then reused: 10,000 listed tools cost nothing until called.
        if self._validator is None:
            self._validator = ArgumentValidator(self.spec.input_schema)
        return self._validator

    @property
    def output_validator(self) -> Validator | None:
        if self._output is _UNSET:
            schema = self.spec.output_schema
            try:
                self._output = compile_schema(schema) if isinstance(schema, dict) else None
            except Uncheckable:  # results are returned anyway; nothing to check them with
                self._output = None
        out: Validator | None = self._output
        return out

    @property
    def signature(self) -> str:
        if self._signature is None:
            self._signature = f"{self.server.py_name}." + stubs.signature_text(
                self.spec, self.py_name
            )
        return self._signature

    def doc(self) -> ToolDoc:
        props = self.spec.input_schema.get("properties") or {}
        return ToolDoc(
            name=self.qualified,
            original=f"{self.spec.server}.{self.spec.name}",
            description=self.spec.description,
            signature_text=lambda: self.signature,
            parameters=tuple(str(p) for p in props),
            input_schema=self.spec.input_schema,
            output_schema=self.spec.output_schema,
            title=self.spec.title,
        )


@dataclass(slots=True)
class ServerEntry:
    source: ToolSource
    name: str
    py_name: str = ""
    tools: dict[str, ToolEntry] | None = None  # by Python name; None until listed
    by_original: dict[str, ToolEntry] = field(default_factory=dict)
    error: str | None = None
    problem: str | None = None  # the sentence results and warnings show for ``error``
    failed_at: float = 0.0
    version: Any = None
    listed_at: float = 0.0
    locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = field(
        default_factory=weakref.WeakKeyDictionary
    )

    def lock(self) -> asyncio.Lock:
        """One listing at a time, per event loop (a shared registry may serve several)."""
        loop = asyncio.get_running_loop()
        lock = self.locks.get(loop)
        if lock is None:
            lock = self.locks[loop] = asyncio.Lock()
        return lock

    stub: str | None = None
    refresh: bool = False  # the next listing must bypass the source's own cache


async def list_tools(source: ToolSource, *, refresh: bool) -> list[ToolSpec]:
    """List, bypassing the source's own cache when asked and when it has one (MCPSource)."""
    if refresh:
        try:
            params = inspect.signature(source.list_tools).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        if "refresh" in params:
            specs: list[ToolSpec] = await source.list_tools(refresh=True)  # type: ignore[call-arg]
            return specs
    return await source.list_tools()
