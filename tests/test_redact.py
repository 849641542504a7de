"""``redact_text``: the one function every upstream text passes through before it is shown."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from codemode.config import parse_servers
from codemode.redact import forget_secrets, redact_text, remember_environment


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


def test_values_of_var_expansions_in_the_server_config_are_redacted() -> None:
    env = {"GH_PAT": "plain-looking-value-42", "HOME": "/home/alice"}
    parse_servers(
        {"mcpServers": {"gh": {"command": "srv", "args": ["--auth", "${GH_PAT}", "${HOME}/x"]}}},
        env=env,
    )
    assert redact_text("auth failed for plain-looking-value-42") == "auth failed for [redacted]"
    assert redact_text("no such dir /home/alice/x") == "no such dir /home/alice/x"  # not secret


def test_secret_looking_env_and_header_values_are_redacted_without_var_syntax() -> None:
    servers = {
        "a": {"command": "srv", "env": {"SERVICE_TOKEN": "literal0value9"}},
        "b": {"url": "https://x.example/mcp", "headers": {"X-Api-Key": "k-1234567"}},
    }
    parse_servers({"mcpServers": servers}, env={})
    assert redact_text("sent literal0value9 and k-1234567") == "sent [redacted] and [redacted]"


def test_host_environment_variables_whose_names_look_secret_are_redacted() -> None:
    remember_environment({"GITHUB_TOKEN": "plainvalue123", "EDITOR": "vim-editor"})
    assert redact_text("sent plainvalue123 with vim-editor") == ("sent [redacted] with vim-editor")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Authorization: Bearer abc.def.ghi123", "Authorization: Bearer [redacted]"),
        ("API_KEY=sk-live-0123456789", "API_KEY=[redacted]"),
        ('{"access_token": "zzzzzzzzzzzzzzzz"}', '{"access_token": "[redacted]"}'),
        ("password: hunter2", "password: [redacted]"),
        ("https://bob:pw1234@db.example/x", "https://bob:[redacted]@db.example/x"),
        ("key sk-ant-api03-abcdefghijklmnopqrst", "key [redacted]"),
        ("gh ghp_abcdefghijklmnopqrstuvwxyz0123", "gh [redacted]"),
        ("aws AKIAABCDEFGHIJKLMNOP here", "aws [redacted] here"),
        ("jwt eyJhbGciOiJI.eyJzdWIiOiIx.c2lnbmF0dXJl", "jwt [redacted]"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "[redacted]"),
        ('"client_secret": "x9y8z7w6v5u4t3"', '"client_secret": "[redacted]"'),
        ("Authorization: Token 9944b09199c62bcf9418", "Authorization: Token [redacted]"),
        ("sk_live_0123456789abcdefghij", "[redacted]"),
        ("slack xoxb-1234567890-abcdef", "slack [redacted]"),
    ],
)
def test_credential_shapes_are_redacted(text: str, shown: str) -> None:
    assert redact_text(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "bad token: please set API_KEY",
        "listening on 127.0.0.1:8080",
        "Traceback (most recent call last):",
        "secret sauce is love",
        "the token count is 42 and the password field is empty",
        "token validation failed for token 42; token abcdefghijklmnopqrstuvwxyz",
    ],
)
def test_ordinary_words_are_left_alone(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize("prefix", ["ghp", "gho", "ghu", "ghs", "ghr"])
def test_every_github_token_prefix_is_redacted(prefix: str) -> None:
    text = f"push with {prefix}_abcdefghijklmnopqrstuvwxyz0123 failed; through the high gate"
    assert redact_text(text) == "push with [redacted] failed; through the high gate"


def test_english_prose_does_not_run_the_github_token_pattern() -> None:
    from codemode import redact

    github = next(s for s in redact._GATED if "ghp_" in s[2])
    prose = "through the high night, enough light: gh"
    assert not any(a in prose for a in github[2])
    assert redact_text(prose) == prose
