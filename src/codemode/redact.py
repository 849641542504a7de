"""Remove credentials from text before a person or a model sees it.

One function, :func:`redact_text`, for every text that comes from outside codemode's own
words and may carry a secret: an upstream server's stderr, its error messages. It removes

- the values that ``${VAR}`` expansions put into ``mcp.json`` / ``config.json`` (the
  config loader calls :func:`remember_secret` for each; well-known non-secret variables
  such as ``HOME`` and ``PATH`` are left alone), and configured header values and ``env``
  values whose names look secret (``*TOKEN*``, ``*KEY*``, ``*SECRET*``...);
- bearer and basic credentials, ``key=value`` pairs whose key looks secret, passwords in
  URLs;
- common API-key shapes (OpenAI/Anthropic ``sk-``, GitHub, GitLab, Slack, AWS, Google,
  JWTs, PEM private keys).

It is a net, not a guarantee: the privacy layer extends it (more detectors, per-tenant
secrets) behind this same function, so callers never change.
"""

from __future__ import annotations

import re
import threading

__all__ = ["REDACTED", "forget_secrets", "redact_text", "remember_secret", "secret_name"]

REDACTED = "[redacted]"
MIN_SECRET = 6
"""Shorter values are not remembered: redacting every ``1`` or ``on`` would garble text."""

NOT_SECRET_VARS = frozenset(
    {"HOME", "USER", "LOGNAME", "PATH", "PWD", "SHELL", "TERM", "TMPDIR", "LANG", "LC_ALL"}
)

_SECRET_NAME = re.compile(
    r"(?i)(api[_-]?key|apikey|token|secret|passw(?:or)?d|pwd|auth|credential|private[_-]?key"
    r"|access[_-]?key|session[_-]?key|cookie)"
)

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # PEM private keys, whole block.
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
            re.S,
        ),
        REDACTED,
    ),
    # Authorization schemes: keep the scheme word.
    (re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{8,}"), rf"\1\2{REDACTED}"),
    # user:password@ in URLs.
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+@"), rf"\1{REDACTED}@"),
    # key=value / key: value / "key": "value" where the key looks secret.
    (
        re.compile(
            r"""(?ix)
            (\b[\w.-]*(?:api[_-]?key|apikey|token|secret|passw(?:or)?d|pwd|credential
                |private[_-]?key|access[_-]?key|authorization)[\w.-]*["']?\s*[:=]\s*["']?)
            (?!\[redacted\])(?:bearer\s+|basic\s+)?
            (?:(?=[^\s"',;&]*\d)[^\s"',;&]{6,}|[^\s"',;&]{12,})  # a digit, or long: not a word
            """
        ),
        rf"\1{REDACTED}",
    ),
    # Key shapes.
    (re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}"), REDACTED),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}"), REDACTED),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), REDACTED),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), REDACTED),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), REDACTED),
]

_secrets: set[str] = set()
_lock = threading.Lock()


def secret_name(name: str) -> bool:
    """Whether a variable, header or field named ``name`` probably holds a credential."""
    return bool(_SECRET_NAME.search(name))


def remember_secret(value: str) -> None:
    """Redact ``value`` wherever it appears from now on (process-wide)."""
    if isinstance(value, str) and len(value.strip()) >= MIN_SECRET:
        with _lock:
            _secrets.add(value.strip())


def forget_secrets() -> None:
    """Drop every remembered value (tests)."""
    with _lock:
        _secrets.clear()


def redact_text(text: str) -> str:
    """``text`` with known secret values and credential-shaped strings replaced."""
    if not text:
        return text
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)
    for value in known:
        if value in text:
            text = text.replace(value, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
