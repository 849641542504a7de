"""Turn a ``ToolCallResult`` into the Python value the agent's code receives.

Rules, in order: an error result raises ``ToolError``; structured output is the value
(unwrapped from ``{"result": ...}`` when the MCP SDK wrapped a plain return value); else
each content item converts on its own (JSON text is parsed, other text stays ``str``,
binary becomes ``Blob``) and several items make a list. Structured output that breaks the
tool's output schema is still returned: a warning is recorded, the agent is not broken.

A lone surrogate (``"\\ud800"`` in a server's JSON, a Python tool's ``surrogateescape``d
file name) has no UTF-8 form, so it could not reach the code: :func:`without_lone_surrogates`
shows each as U+FFFD before anything else sees the result (budgets, audit, privacy).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

from codemode.errors import ToolError
from codemode.tools.spec import BlobContent, Content, JSONSchema, TextContent, ToolCallResult
from codemode_worker.bounds import keep_ends, keep_head
from codemode_worker.protocol import LONE_SURROGATE, Blob

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


def lone_surrogates_warning(count: int) -> str:
    """What the code is told when ``count`` lone surrogates of a result were replaced."""
    return (
        f"its result held {count} lone surrogate(s) (\\ud800-\\udfff, which no UTF-8 text "
        "can carry); each is shown as U+FFFD"
    )


def replace_lone_surrogates(value: Any) -> tuple[Any, int]:
    """``value`` (JSON-like: str, dict, list) with each lone surrogate of its strings and keys
    as U+FFFD, and how many were replaced (the same object when none was)."""
    if not _has_lone(value):
        return value, 0
    count = 0

    def walk(item: Any) -> Any:
        nonlocal count
        if isinstance(item, str):
            if item.isascii():
                return item
            fixed, n = LONE_SURROGATE.subn("\ufffd", item)
            count += n
            return fixed
        if isinstance(item, dict):
            return {walk(k): walk(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [walk(v) for v in item]
        return item

    return walk(value), count


def without_lone_surrogates(result: ToolCallResult) -> tuple[ToolCallResult, int]:
    """``result`` with each lone surrogate as U+FFFD (its text, structured keys and values),
    and how many were replaced: the data reaches the code, the warning says what changed."""
    count = 0
    content: list[Content] = []
    for c in result.content:
        if isinstance(c, TextContent):
            text, n = replace_lone_surrogates(c.text)
            content.append(TextContent(text) if n else c)
        else:
            uri, n = replace_lone_surrogates(c.uri)
            content.append(replace(c, uri=uri) if n else c)
        count += n
    structured, n = replace_lone_surrogates(result.structured)
    count += n
    if not count:
        return result, 0
    return replace(result, content=content, structured=structured), count


def _has_lone(value: Any) -> bool:
    """Whether a JSON-like value holds a lone surrogate: one pass in compiled code (strict
    UTF-8 refuses them), a walk only when it does."""
    if value is None:
        return False
    if isinstance(value, str):
        if value.isascii():
            return False
        try:
            value.encode()
        except UnicodeEncodeError:
            return True
        return False
    try:
        to_json(value, fallback=str)
    except PydanticSerializationError as exc:  # circular, or a lone surrogate
        return "surrogate" in str(exc)
    return False


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
