"""Anthropic's Messages API through the official ``anthropic`` SDK."""

from __future__ import annotations

from typing import Any

from codemode.errors import LLMError

from ..config import LLMConfig
from ..messages import (
    Message,
    ModelReply,
    ModelRequest,
    ToolCallRequest,
    Usage,
    reported_text,
    reported_tokens,
    unreadable_answer,
)
from . import OFFICIAL_URLS, require_key, translate_error


def to_anthropic_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Anthropic wants alternating roles: tool results are user content, merged in order."""
    out: list[dict[str, Any]] = []
    for m in messages:
        blocks: list[dict[str, Any]]
        if m.role == "tool":
            role = "user"
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m.tool_call_id,
                "content": m.text,
            }
            if m.is_error:
                block["is_error"] = True
            blocks = [block]
        elif m.role == "assistant":
            role = "assistant"
            blocks = [{"type": "text", "text": m.text}] if m.text else []
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in m.tool_calls
            ]
        else:
            role = "user"
            blocks = [{"type": "text", "text": m.text}]
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


class AnthropicModel:
    """A ``Model`` over ``AsyncAnthropic().messages.create``."""

    provider = "anthropic"
    supports_tools = True

    def __init__(self, client: Any, sdk: Any, *, model: str, secret: str = "") -> None:
        self._client = client
        self._sdk = sdk
        self.model = model
        self._secret = secret

    @classmethod
    def from_config(cls, cfg: LLMConfig, sdk: Any) -> AnthropicModel:
        key = require_key(cfg, "anthropic")
        client = sdk.AsyncAnthropic(
            api_key=key,
            base_url=cfg.url_for("anthropic") or OFFICIAL_URLS["anthropic"],
            timeout=cfg.timeout,
            max_retries=cfg.max_retries,
        )
        return cls(client, sdk, model=cfg.effective_model, secret=key)

    async def complete(self, request: ModelRequest) -> ModelReply:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "system": request.system,
            "messages": to_anthropic_messages(request.messages),
        }
        if request.tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in request.tools
            ]
        if request.temperature is not None:
            kwargs["temperature"] = min(request.temperature, 1.0)
        try:
            response = await self._client.messages.create(**kwargs)
        except self._sdk.AnthropicError as exc:
            raise translate_error(exc, self._sdk, self.provider, self._secret) from None
        except ValueError as exc:  # a 200 whose body is not JSON
            raise unreadable_answer(exc, self.provider) from None
        return _reply(response, self.provider)

    async def aclose(self) -> None:
        await self._client.close()


def _reply(response: Any, provider: str) -> ModelReply:
    """The SDK's message as a ``ModelReply``; every field is checked (the SDK does not
    check what a server sent): a reply of the wrong shape is an ``LLMError``."""
    try:
        texts: list[str] = []
        calls: list[ToolCallRequest] = []
        for block in response.content or []:
            kind = getattr(block, "type", "")
            if kind == "text":
                texts.append(reported_text(block.text, "a text block", provider))
            elif kind == "tool_use":
                args = block.input if isinstance(block.input, dict) else {}
                calls.append(
                    ToolCallRequest(
                        reported_text(block.id, "a tool call's id", provider),
                        reported_text(block.name, "a tool call's name", provider),
                        args,
                    )
                )
        usage = getattr(response, "usage", None)
        return ModelReply(
            text="\n".join(texts),
            tool_calls=calls,
            usage=Usage(
                reported_tokens(getattr(usage, "input_tokens", None), "input_tokens", provider),
                reported_tokens(getattr(usage, "output_tokens", None), "output_tokens", provider),
            ),
            stop_reason=str(getattr(response, "stop_reason", "") or ""),
            model=str(getattr(response, "model", "") or ""),
        )
    except (AttributeError, TypeError, IndexError, KeyError) as exc:
        raise LLMError(
            f"{provider}'s answer is not a message ({type(exc).__name__}: {exc})",
            provider=provider,
        ) from None
