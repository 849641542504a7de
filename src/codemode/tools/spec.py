"""Tool descriptions and call results in codemode's own types.

Nothing here knows MCP: tool sources (``tools/sources/``) convert their protocol's
types into these in one place, so the rest of codemode survives SDK upgrades.
"""

from __future__ import annotations

import keyword
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

JSONSchema = dict[str, Any]

_NON_IDENT = re.compile(r"\W+")


def py_identifier(name: str) -> str:
    """Map a server or tool name to a Python identifier, predictably.

    ``get-weather`` -> ``get_weather``, ``2fa.check`` -> ``_2fa_check``, ``class`` -> ``class_``.
    """
    # Python NFKC-normalises identifiers when parsing: do the same, so names match.
    ident = _NON_IDENT.sub("_", unicodedata.normalize("NFKC", name).strip()).strip("_") or "_"
    if ident[0].isdigit():
        ident = "_" + ident
    if keyword.iskeyword(ident) or keyword.issoftkeyword(ident):
        ident += "_"
    return ident


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as codemode sees it, whatever its source."""

    server: str
    name: str
    description: str = ""
    input_schema: JSONSchema = field(default_factory=lambda: {"type": "object", "properties": {}})
    output_schema: JSONSchema | None = None
    annotations: Mapping[str, Any] = field(default_factory=dict)
    """MCP tool annotations as the source declares them (``readOnlyHint``...)."""
    title: str | None = None
    trusted: bool = False
    """Whether ``annotations`` are believed: the server is marked ``"trusted"`` in mcp.json,
    or the tool is a Python callable the host registered. Otherwise the MCP defaults
    apply (``codemode.policy.hints``)."""
    in_workspace: bool = False
    """The tool works in the workspace's ``files/`` (the sandbox's ``/workspace``), as a
    declared command-line tool does: what it writes there comes back to the code, so
    privacy gives it tokens unless the configuration makes it a sink (``privacy.sinks``)."""
    alias: str = ""
    """``server.tool`` as agents' code calls it when the registry had to name it otherwise
    than ``qualified_name`` (a name that collides after mapping gets ``_2``; a server named
    like a method of ``tools`` gets ``_``); empty when they agree. Set by the registry."""

    @property
    def py_server(self) -> str:
        return py_identifier(self.server)

    @property
    def py_name(self) -> str:
        return py_identifier(self.name)

    @property
    def qualified_name(self) -> str:
        """``server.tool`` in Python identifiers: how agents' code names it."""
        return f"{self.py_server}.{self.py_name}"

    @property
    def names(self) -> tuple[str, ...]:
        """Every name a rule may give this tool (policy, budgets): ``server.tool`` as the
        source spells it, in Python identifiers, and as the code calls it."""
        own = (f"{self.server}.{self.name}", self.qualified_name)
        return (*own, self.alias) if self.alias else own


@dataclass(frozen=True, slots=True)
class TextContent:
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class BlobContent:
    """Binary content (image, audio, embedded resource) with its MIME type."""

    data: bytes
    mime_type: str
    kind: Literal["image", "audio", "resource"] = "image"
    uri: str | None = None


Content = TextContent | BlobContent


@dataclass(slots=True)
class ToolCallResult:
    """What a source returns for one call, before conversion to a Python value."""

    content: list[Content] = field(default_factory=list)
    structured: Any = None
    is_error: bool = False
    warnings: list[str] = field(default_factory=list)


@runtime_checkable
class ToolSource(Protocol):
    """A provider of tools: one MCP server, or a set of Python callables.

    ``name`` is the server name agents see. Implementations connect lazily and
    must be safe to call concurrently.
    """

    @property
    def name(self) -> str: ...

    async def list_tools(self) -> list[ToolSpec]: ...

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> ToolCallResult: ...

    async def aclose(self) -> None: ...
