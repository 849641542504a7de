"""The credentials net: ${VAR} values, environment secrets and credential shapes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.config import load_servers
from codemode.redact import REDACTED, forget_secrets, redact_text, remember_environment


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    forget_secrets()
    yield
    forget_secrets()


def test_values_expanded_into_mcp_json_are_redacted_everywhere(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "api": {"url": "https://x.example/mcp", "headers": {"X-Api": "${API_SECRET}"}}
                }
            }
        )
    )
    load_servers(tmp_path / "mcp.json", env={"API_SECRET": "s3cr3t-value-42", "HOME": "/root"})
    assert (
        redact_text("failed with s3cr3t-value-42 in header") == f"failed with {REDACTED} in header"
    )
    assert redact_text("/root/x") == "/root/x"  # HOME is not a secret


def test_secret_looking_environment_variables_are_redacted() -> None:
    remember_environment({"GITHUB_TOKEN": "plainvalue123", "EDITOR": "vim-editor"})
    assert redact_text("token plainvalue123 editor vim-editor") == (
        f"token {REDACTED} editor vim-editor"
    )


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: Bearer abcdefghijklmnop.qrstu",
        "postgres://user:hunter2hunter@db.internal/app",
        "api_key=AbCdEf123456",
        '"client_secret": "x9y8z7w6v5u4t3"',
        "key sk-proj-abcdefghijklmnopqrstuvwx",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "AKIAABCDEFGHIJKLMNOP",
        "Authorization: Token 9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9",
    ],
)
def test_credential_shapes_are_redacted(text: str) -> None:
    out = redact_text(text)
    assert REDACTED in out
    for secret in (
        "abcdefghijklmnop",
        "hunter2hunter",
        "AbCdEf123456",
        "x9y8z7w6v5u4t3",
        "sk-proj",
        "ghp_",
        "AKIA",
        "MIIEow",
        "dozjgNry",
        "9944b091",
    ):
        assert secret not in out


def test_plain_text_is_left_alone() -> None:
    text = (
        "the token count is 42 and the password field is empty; token validation failed "
        "for token 42; token abcdefghijklmnopqrstuvwxyz"
    )
    assert redact_text(text) == text
