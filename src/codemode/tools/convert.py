"""Turn a ``ToolCallResult`` into the Python value the agent's code receives.

Rules, in order: an error result raises ``ToolError``; structured output is the value
(unwrapped from ``{"result": ...}`` when the MCP SDK wrapped a plain return value); else
each content item converts on its own (JSON text is parsed, other text stays ``str``,
binary becomes ``Blob``) and several items make a list. Structured output that breaks the
tool's output schema is still returned: a warning is recorded, the agent is not broken.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from codemode.errors import ToolError
from codemode.tools.spec import BlobContent, Content, JSONSchema, TextContent, ToolCallResult
from codemode_worker.bounds import keep_ends, keep_head
from codemode_worker.protocol import Blob

_JSON_START = frozenset('{["-0123456789tfn')


def wrapped_result_key(output_schema: JSONSchema | None) -> str | None:
    """``"result"`` when the schema is the MCP SDK's wrapper around a non-object return.

    The SDK publishes ``{"title": "<fn>Output", "properties": {"result": ...},
    "required": ["result"]}`` for functions returning ``int``, ``list[...]`` etc.; the
    agent wants the inner value.
    """
    if not isinstance(output_schema, Mapping):
        return None
    props = output_schema.get("properties")
    if (
        isinstance(props, Mapping)
        and list(props) == ["result"]
        and output_schema.get("required") == ["result"]
        and str(output_schema.get("title", "")).endswith("Output")
    ):
        return "result"
    return None


def text_value(text: str) -> Any:
    """Parse ``text`` as JSON when it is JSON; otherwise keep the string."""
    stripped = text.lstrip()
    if not stripped or stripped[0] not in _JSON_START:
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def content_value(item: Content) -> Any:
    if isinstance(item, TextContent):
        return text_value(item.text)
    if isinstance(item, BlobContent):
        return Blob(item.data, item.mime_type, item.kind, item.uri)
    raise TypeError(f"unknown content type {type(item).__name__}")


MAX_ERROR_MESSAGE = 20_000
"""Characters of a tool's error message kept in the ToolError (cut with an honest marker)."""


def error_message(result: ToolCallResult) -> str:
    texts = [c.text for c in result.content if isinstance(c, TextContent)]
    if texts:
        return keep_ends("\n".join(texts), MAX_ERROR_MESSAGE)
    if result.structured is not None:
        return keep_head(json.dumps(result.structured, default=str), MAX_ERROR_MESSAGE)
    return "the tool reported an error without a message"


def to_value(
    result: ToolCallResult, *, server: str = "", tool: str = "", unwrap: str | None = None
) -> Any:
    """The Python value for ``result``; raises ``ToolError`` if the tool reported an error."""
    if result.is_error:
        raise ToolError(error_message(result), server=server, tool=tool)
    structured = result.structured
    if structured is not None:
        if unwrap is not None and isinstance(structured, dict) and list(structured) == [unwrap]:
            return structured[unwrap]
        return structured
    content = result.content
    if not content:
        return None
    if len(content) == 1:
        return content_value(content[0])
    return [content_value(c) for c in content]


def size_of(result: ToolCallResult) -> int:
    """Bytes the tool returned (UTF-8 text and binary content; the structured content's
    JSON when there is no other), for budgets and the audit log."""
    size = 0
    for c in result.content:
        size += len(_utf8(c.text)) if isinstance(c, TextContent) else len(c.data)
    if not result.content and result.structured is not None:
        size = len(_utf8(json.dumps(result.structured, default=str, ensure_ascii=False)))
    return size


def _utf8(text: str) -> bytes:
    """A tool's JSON may hold a lone surrogate (``"\\udc80"``), which strict UTF-8
    refuses: counted as its three bytes, where the error lost the result of a call that
    had run and left it out of the budget and the audit."""
    return text.encode("utf-8", "surrogatepass")
