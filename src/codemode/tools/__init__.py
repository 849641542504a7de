"""Tools: specs, the registry and its call pipeline, discovery, typed stubs.

Nothing here imports the MCP SDK; ``codemode.tools.sources.mcp`` does, on demand.
"""

from codemode.tools.entries import assign_names
from codemode.tools.registry import Middleware, NextCall, ToolCall, ToolRegistry
from codemode.tools.search import LexicalIndex, ToolIndex, tokenize
from codemode.tools.sources.python import PythonSource
from codemode.tools.spec import (
    BlobContent,
    Content,
    TextContent,
    ToolCallResult,
    ToolSource,
    ToolSpec,
    py_identifier,
)
from codemode.tools.stubs import generate_tree, server_module_source, signature_text
from codemode.tools.validate import ArgumentValidator

__all__ = [
    "ArgumentValidator",
    "BlobContent",
    "Content",
    "LexicalIndex",
    "Middleware",
    "NextCall",
    "PythonSource",
    "TextContent",
    "ToolCall",
    "ToolCallResult",
    "ToolIndex",
    "ToolRegistry",
    "ToolSource",
    "ToolSpec",
    "assign_names",
    "generate_tree",
    "py_identifier",
    "server_module_source",
    "signature_text",
    "tokenize",
]
