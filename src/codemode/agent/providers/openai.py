"""OpenAI Chat Completions through the official ``openai`` SDK: OpenAI, Azure OpenAI and
the many servers that speak the same API (any ``base_url``).

Some models refuse ``max_tokens`` and want ``max_completion_tokens`` (or refuse a
``temperature``); with ``token_param="auto"`` the first such refusal switches the
parameter for the rest of the model's life and the request is sent again.
"""

from __future__ import annotations

import json
from typing import Any

from codemode.errors import ConfigError, LLMError

from ..config import LLMConfig
from ..messages import (
    Message,
    ModelReply,
    ModelRequest,
    ToolCallRequest,
    Usage,
    parse_arguments,
    reported_text,
    reported_tokens,
    unreadable_answer,
)
from . import OFFICIAL_URLS, require_key, translate_error

# Model families known to want max_completion_tokens (reasoning models).
_COMPLETION_TOKEN_MODELS = ("o1", "o3", "o4", "gpt-5")


def to_openai_messages(system: str, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.text})
        elif m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.text or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {
                                "name": c.name,
                                "arguments": c.raw_arguments or json.dumps(c.arguments),
                            },
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": m.role, "content": m.text})
    return out


class OpenAIChatModel:
    """A ``Model`` over ``AsyncOpenAI`` / ``AsyncAzureOpenAI`` chat completions."""

    supports_tools = True

    def __init__(
        self,
        client: Any,
        sdk: Any,
        *,
        model: str,
        provider: str = "openai",
        token_param: str = "auto",
        secret: str = "",
    ) -> None:
        self._client = client
        self._sdk = sdk
        self.model = model
        self.provider = provider
        self._secret = secret
        if token_param == "auto":
            token_param = (
                "max_completion_tokens"
                if model.lower().startswith(_COMPLETION_TOKEN_MODELS)
                else "max_tokens"
            )
        self._token_param = token_param
        self._auto = True
        self._send_temperature = True

    @classmethod
    def from_config(cls, cfg: LLMConfig, sdk: Any) -> OpenAIChatModel:
        provider = cfg.effective_provider
        key = require_key(cfg, provider)
        common: dict[str, Any] = {
            "api_key": key,
            "timeout": cfg.timeout,
            "max_retries": cfg.max_retries,
        }
        if provider == "azure_openai":
            if not cfg.azure_endpoint and not cfg.base_url:
                raise ConfigError(
                    "the azure_openai provider needs an endpoint: set AZURE_OPENAI_ENDPOINT "
                    "(or llm_azure_endpoint=)"
                )
            deployment = cfg.azure_deployment or cfg.model
            if not deployment:
                raise ConfigError(
                    "the azure_openai provider needs a deployment: set "
                    "AZURE_OPENAI_DEPLOYMENT_NAME (or llm_azure_deployment=)"
                )
            if cfg.base_url:
                client = sdk.AsyncAzureOpenAI(
                    base_url=cfg.base_url, api_version=cfg.azure_api_version, **common
                )
            else:
                client = sdk.AsyncAzureOpenAI(
                    azure_endpoint=cfg.azure_endpoint,
                    azure_deployment=deployment,
                    api_version=cfg.azure_api_version,
                    **common,
                )
            model = cfg.model or deployment
        else:
            # Always explicit: the SDK must not pick an endpoint up on its own.
            base_url = cfg.url_for("openai") or OFFICIAL_URLS["openai"]
            client = sdk.AsyncOpenAI(base_url=base_url, **common)
            model = cfg.effective_model
        explicit = cfg.token_param
        m = cls(client, sdk, model=model, provider=provider, token_param=explicit, secret=key)
        m._auto = explicit == "auto"
        return m

    async def complete(self, request: ModelRequest) -> ModelReply:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(request.system, request.messages),
        }
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                }
                for t in request.tools
            ]
        refused: Exception | None = None
        for _ in range(3):  # at most: switch the token parameter, drop the temperature
            kwargs.pop("max_tokens", None)
            kwargs.pop("max_completion_tokens", None)
            kwargs[self._token_param] = request.max_tokens
            if request.temperature is not None and self._send_temperature:
                kwargs["temperature"] = request.temperature
            else:
                kwargs.pop("temperature", None)
            try:
                response = await self._client.chat.completions.create(**kwargs)
            except self._sdk.BadRequestError as exc:
                if not self._adapt(exc):
                    raise translate_error(exc, self._sdk, self.provider, self._secret) from None
                refused = exc
                continue
            except self._sdk.OpenAIError as exc:
                raise translate_error(exc, self._sdk, self.provider, self._secret) from None
            except ValueError as exc:  # a 200 whose body is not JSON
                raise unreadable_answer(exc, self.provider) from None
            return _reply(response, self.provider)
        assert refused is not None
        raise translate_error(refused, self._sdk, self.provider, self._secret) from None

    def _adapt(self, exc: Exception) -> bool:
        """Adjust to a model's refusal of a parameter; True when worth sending again."""
        text = str(getattr(exc, "body", None) or exc).lower()
        if not self._auto or "unsupported" not in text:
            return False
        if "max_tokens" in text and self._token_param == "max_tokens":
            self._token_param = "max_completion_tokens"
            return True
        if "max_completion_tokens" in text and self._token_param == "max_completion_tokens":
            self._token_param = "max_tokens"
            return True
        if "temperature" in text and self._send_temperature:
            self._send_temperature = False
            return True
        return False

    async def aclose(self) -> None:
        await self._client.close()


def _reply(response: Any, provider: str) -> ModelReply:
    """The SDK's response as a ``ModelReply``. The SDK does not check what a server sent
    (a compatible server, a proxy): every field is checked here, and a reply of the wrong
    shape is an ``LLMError``, never a crash of the loop nor a budget it escapes."""
    try:
        choice = response.choices[0] if response.choices else None
        msg = choice.message if choice is not None else None
        calls: list[ToolCallRequest] = []
        for call in (msg.tool_calls if msg is not None else None) or []:
            fn = getattr(call, "function", None)
            if fn is None:
                continue
            raw_args = fn.arguments
            if raw_args is not None and not isinstance(raw_args, str | dict):
                raw_args = reported_text(raw_args, "a tool call's arguments", provider)
            args, raw = parse_arguments(raw_args)
            calls.append(
                ToolCallRequest(
                    reported_text(call.id, "a tool call's id", provider),
                    reported_text(fn.name, "a tool call's name", provider),
                    args,
                    raw,
                )
            )
        usage = getattr(response, "usage", None)
        return ModelReply(
            text=reported_text(msg.content if msg is not None else None, "content", provider),
            tool_calls=calls,
            usage=Usage(
                reported_tokens(getattr(usage, "prompt_tokens", None), "prompt_tokens", provider),
                reported_tokens(
                    getattr(usage, "completion_tokens", None), "completion_tokens", provider
                ),
            ),
            stop_reason=str(choice.finish_reason if choice is not None else ""),
            model=str(getattr(response, "model", "") or ""),
        )
    except (AttributeError, TypeError, IndexError, KeyError) as exc:
        raise LLMError(
            f"{provider}'s answer is not a chat completion ({type(exc).__name__}: {exc})",
            provider=provider,
        ) from None
