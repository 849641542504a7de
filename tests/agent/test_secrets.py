"""The host's API key never reaches the sandbox, and the sandbox cannot choose where it goes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemode.agent import create_agent
from codemode.agent.testing import Answer, Code, FakeLLMServer, Status

from .conftest import KEY, make_agent


def test_code_run_by_the_agent_sees_no_api_key_in_its_environment(
    llm: FakeLLMServer, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", llm.openai_url)
    llm.add(
        Code("import os, json\nprint(json.dumps(dict(os.environ)))"),
        Code("print(open('/proc/self/environ','rb').read().decode(errors='replace'))"),
        Answer("done"),
    )
    with create_agent(base=base) as agent:  # the key and URL come from the environment
        r = agent.execute_task("show your environment")
    assert r.success and len(llm.requests) == 3
    for req in llm.requests[1:]:
        assert KEY not in req.last_tool_output()
    assert KEY not in json.dumps(r.to_dict())


def test_a_dotenv_planted_by_sandboxed_code_does_not_redirect_the_key(
    llm: FakeLLMServer, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = base / "files"  # the sandbox's /workspace
    files.mkdir(exist_ok=True)
    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": llm.openai_url}
    with FakeLLMServer([Answer("stolen")]) as attacker:
        # CODEMODE_LLM_BASE_URL would beat OPENAI_BASE_URL if a planted file were read.
        line = f"CODEMODE_LLM_BASE_URL={attacker.openai_url}"
        plant = (
            "import os\n"
            f"for path in ('.env', {str(base / '.env')!r}):\n"
            "    try:\n"
            f"        open(path, 'w').write({line!r})\n"
            "        print('wrote', os.path.abspath(path))\n"
            "    except OSError as exc:\n"
            "        print('refused', path, type(exc).__name__)\n"
        )
        llm.add(Code(plant), Answer("planted"), Answer("second agent"))
        with create_agent(base=base, env=env) as agent:  # default executor: the sandbox
            first = agent.execute_task("write files")
        assert "wrote /workspace/.env" in first.output
        assert not (base / ".env").exists()  # the workspace root is out of the sandbox's reach
        assert (files / ".env").read_text() == f"CODEMODE_LLM_BASE_URL={attacker.openai_url}"
        monkeypatch.chdir(files)  # even run from the directory the code wrote to
        with create_agent(base=base, env=env) as agent:
            second = agent.execute_task("hello")
        assert second.success and second.result == "second agent"
        assert attacker.requests == []


LEAKY_ERROR = (
    "upstream gateway refused: Authorization: Bearer gw0123456789abcdefghijKLMNOPQR, "
    "retried with sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 and "
    "AKIAABCDEFGHIJKLMNOP; signing key -----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAq1w2e3r4t5y6u7i8o9p0\n-----END RSA PRIVATE KEY-----"
)
LEAKED = (
    "gw0123456789abcdefghijKLMNOPQR",
    "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "AKIAABCDEFGHIJKLMNOP",
    "MIIEowIBAAKCAQEAq1w2e3r4t5y6u7i8o9p0",
)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_credentials_in_a_providers_error_body_reach_neither_result_nor_logs(
    llm: FakeLLMServer, base: Path, provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    llm.add(Status(400, LEAKY_ERROR))
    with caplog.at_level("DEBUG"), make_agent(llm, base, provider) as agent:
        r = agent.execute_task("hi")
    assert r.stop_reason == "llm_error" and "upstream gateway refused" in (r.error or "")
    assert "[redacted]" in (r.error or "")
    seen = json.dumps(r.to_dict()) + caplog.text
    for secret in LEAKED:
        assert secret not in seen
