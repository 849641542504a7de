"""The conversation as the agent loop sees it, independent of any provider's wire format.

Providers translate these to and from their SDK's types in one place each
(``providers/openai.py``, ``providers/anthropic.py``, the MCP sampling model in
``codemode.server``). Nothing here imports a provider SDK.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal, Protocol

from codemode.errors import LLMError

RUN_CODE = "run_code"
PROMPTS = "codemode.agent.prompts"

Role = Literal["user", "assistant", "tool"]


@functools.cache
def prompt_text(name: str) -> str:
    return resources.files(PROMPTS).joinpath(name).read_text(encoding="utf-8").rstrip("\n")


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """A tool call the model asked for (normally ``run_code`` with ``{"code": ...}``)."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str = ""
    """The arguments as the model sent them, when they were not a JSON object."""


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the conversation.

    ``assistant`` messages may carry ``tool_calls``; ``tool`` messages answer one call
    (``tool_call_id``) with ``text`` and ``is_error``.
    """

    role: Role
    text: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    tool_call_id: str = ""
    is_error: bool = False


@dataclass(slots=True)
class Usage:
    """Tokens as the provider reported them."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
        }


def reported_tokens(value: Any, name: str, provider: str) -> int:
    """A token count from a provider's reply: missing is 0. A negative count would lift
    ``max_total_tokens`` (the budget adds them up), and NaN, infinity or text would crash
    the loop; any of these is an ``LLMError``: the provider's figures cannot be trusted."""
    if value is None:
        return 0
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and value == value and 0 <= value < float("inf") and value == int(value):
        return int(value)
    raise LLMError(
        f"{provider} reported {name}={str(value)[:80]!r}, not a token count: its answer "
        "cannot be trusted (is the base URL a real model endpoint?)",
        provider=provider,
    )


def reported_text(value: Any, name: str, provider: str) -> str:
    """A text field of a provider's reply (content, tool name, call id): missing is ``""``;
    anything but a string is an ``LLMError`` rather than a crash later in the loop."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    raise LLMError(
        f"{provider} answered a {type(value).__name__} as {name}, not text: its answer "
        "cannot be trusted (is the base URL a real model endpoint?)",
        provider=provider,
    )


def unreadable_answer(exc: ValueError, provider: str) -> LLMError:
    """A provider whose HTTP 200 body is not JSON (a web page at the base URL, a proxy's
    login page): the SDKs raise ``JSONDecodeError``, not one of their own errors."""
    return LLMError(
        f"{provider}'s answer is not JSON ({exc}): is the base URL a model endpoint "
        "and not a web page or a proxy?",
        provider=provider,
    )


@dataclass(slots=True)
class ModelReply:
    text: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = ""
    model: str = ""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model: name, description and JSON schema of its input."""

    name: str
    description: str
    input_schema: dict[str, Any]


def run_code_tool() -> ToolSpec:
    return ToolSpec(
        RUN_CODE,
        prompt_text("run_code.md"),
        {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "Python source to run."}},
            "required": ["code"],
        },
    )


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything a provider needs for one completion."""

    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 2000
    temperature: float | None = None


class Model(Protocol):
    """One small seam per provider: turn a request into a reply (retries are its own)."""

    provider: str
    model: str
    supports_tools: bool

    async def complete(self, request: ModelRequest) -> ModelReply: ...

    async def aclose(self) -> None: ...


def parse_arguments(raw: str | dict[str, Any] | None) -> tuple[dict[str, Any], str]:
    """Tool-call arguments as a dict, plus the raw text when it was not a JSON object."""
    if isinstance(raw, dict):
        return raw, ""
    if not raw:
        return {}, ""
    try:
        value = json.loads(raw)
    except ValueError:
        return {}, raw
    return (value, "") if isinstance(value, dict) else ({}, raw)


# --------------------------------------------------------------------------- code blocks

_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+.-]*)[^\n]*\n"
    r"(?P<body>.*?)"
    r"^(?P=indent)(?P=fence)[ \t]*$",
    re.DOTALL | re.MULTILINE,
)
PYTHON_LANGS = frozenset({"python", "py", "python3", "py3"})


def extract_code_blocks(text: str, *, untagged: bool = False) -> list[str]:
    """The ```python fenced blocks of a model reply, in order.

    Blocks tagged with another language (```json, ```bash) are skipped; untagged blocks
    count only with ``untagged=True``. The fence's indentation is removed from the body.
    """
    blocks: list[str] = []
    for m in _FENCE.finditer(text):
        lang = m.group("lang").lower()
        if lang in PYTHON_LANGS or (untagged and not lang):
            indent = m.group("indent")
            lines = m.group("body").splitlines()
            if indent:
                lines = [ln[len(indent) :] if ln.startswith(indent) else ln for ln in lines]
            code = "\n".join(lines).strip("\n")
            if code.strip():
                blocks.append(code)
    return blocks
