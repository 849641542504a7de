"""Models behind the ``Model`` seam: OpenAI (and Azure, and compatible servers), Anthropic.

Each provider module is imported only when chosen, so ``codemode`` never needs the
``openai`` or ``anthropic`` packages unless they are used (``pip install 'codemode[agent]'``).
Retries with backoff on 429/5xx/timeouts are the official SDKs' own (``max_retries``);
what is left once they give up becomes an ``LLMError`` here, in one place.
"""

from __future__ import annotations

from typing import Any

from codemode.errors import ConfigError, LLMAuthError, LLMError

from ..config import LLMConfig
from ..messages import Model

OFFICIAL_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}

KEY_SETTINGS = {
    "openai": "OPENAI_API_KEY (or llm_api_key=)",
    "azure_openai": "AZURE_OPENAI_API_KEY (or llm_api_key=)",
    "anthropic": "ANTHROPIC_API_KEY (or llm_api_key=)",
}

__all__ = ["OFFICIAL_URLS", "make_model", "translate_error"]


def _sdk(package: str) -> Any:
    try:
        if package == "openai":
            import openai

            return openai
        import anthropic

        return anthropic
    except ModuleNotFoundError as exc:
        if exc.name != package:
            raise
        raise ConfigError(
            f"the {package} provider needs the {package!r} package: "
            f"pip install 'codemode[{package}]' (or 'codemode[agent]' for every provider)"
        ) from None


def make_model(cfg: LLMConfig) -> Model:
    """The model ``cfg`` names; ``ConfigError`` when a required setting is missing."""
    provider = cfg.effective_provider
    if provider in ("openai", "azure_openai"):
        from .openai import OpenAIChatModel

        return OpenAIChatModel.from_config(cfg, _sdk("openai"))
    if provider == "anthropic":
        from .anthropic import AnthropicModel

        return AnthropicModel.from_config(cfg, _sdk("anthropic"))
    if provider == "sampling":
        raise ConfigError(
            "llm provider 'sampling' uses the model of the MCP client connected to "
            "`codemode serve`; it is only available to the execute_task tool there"
        )
    raise ConfigError("no LLM provider is configured")


def require_key(cfg: LLMConfig, provider: str) -> str:
    key = cfg.key_for(provider)
    if key is None or not key.get_secret_value().strip():
        raise ConfigError(f"the {provider} provider needs an API key: set {KEY_SETTINGS[provider]}")
    return key.get_secret_value()


def _redact(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret and len(secret) >= 4 else text


def translate_error(exc: Exception, sdk: Any, provider: str, secret: str) -> LLMError:
    """The SDK's exception (after its own retries) as codemode's error, without the key
    (``LLMError`` itself removes any other credential the provider's text holds)."""
    status = getattr(exc, "status_code", None)
    detail = _redact(_message(exc), secret).rstrip(". ")
    if isinstance(exc, sdk.AuthenticationError | sdk.PermissionDeniedError):
        return LLMAuthError(
            f"{provider} rejected the credentials (HTTP {status}): {detail}. "
            f"Check {KEY_SETTINGS.get(provider, 'the API key')} and the endpoint.",
            provider=provider,
            status=status,
        )
    if isinstance(exc, sdk.RateLimitError):
        what = f"{provider} kept answering 429 (rate limited) after the retries"
    elif isinstance(exc, sdk.APITimeoutError):
        what = f"{provider} did not answer within the timeout, retries included"
    elif isinstance(exc, sdk.APIConnectionError):
        what = f"cannot reach {provider}"
    elif isinstance(exc, sdk.APIStatusError):
        what = f"{provider} refused the request (HTTP {status})"
    else:
        what = f"{provider} call failed"
    return LLMError(f"{what}: {detail}", provider=provider, status=status)


def _message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(getattr(exc, "message", None) or exc) or type(exc).__name__
