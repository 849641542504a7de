"""The example chat backend: a real FastAPI WebSocket app driving a real agent."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from codemode.agent.testing import Answer, Code, FakeLLMServer

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "chat_backend_app", REPO / "examples" / "chat_backend" / "app.py"
)
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
build_app = _module.build_app

KEY = "sk-example-key-000"


@pytest.fixture
def ws_base(tmp_path: Path) -> Path:
    (tmp_path / "mcp.json").write_text('{"mcpServers": {}}')
    return tmp_path


def test_the_websocket_streams_steps_then_the_answer_and_keeps_the_session(ws_base: Path) -> None:
    script = [
        Code("expenses = [80, 120, 450]\nprint(sum(1 for e in expenses if e > 100))"),
        Answer("2 expenses are over $100."),
        Code("print(max(expenses))"),
        Answer("The largest is $450."),
    ]
    with FakeLLMServer(script, api_key=KEY) as llm:
        app = build_app(
            base=ws_base,
            executor="subprocess",
            env={},
            llm_provider="openai",
            llm_base_url=llm.openai_url,
            llm_api_key=KEY,
        )
        with TestClient(app) as client, client.websocket_connect("/ws/chat") as ws:
            ws.send_json({"message": "How many expenses are over $100?"})
            code, output, answer = ws.receive_json(), ws.receive_json(), ws.receive_json()
            ws.send_json({"message": "And the largest?"})  # same connection, same session
            later = [ws.receive_json() for _ in range(3)]
            ws.send_json({"message": ""})
            bad = ws.receive_json()
    assert code == {"type": "step", "kind": "code", "step": 1, "text": script[0].code, "ok": True}
    assert output["kind"] == "output" and output["text"] == "2"
    assert answer["type"] == "answer" and answer["success"] is True
    assert answer["text"] == "2 expenses are over $100." and answer["steps"] == 2
    assert later[1]["text"] == "450" and later[2]["text"] == "The largest is $450."
    assert bad["type"] == "error"
    assert len(llm.requests) == 4


def test_without_a_model_the_answer_is_an_honest_failure(ws_base: Path) -> None:
    app = build_app(base=ws_base, executor="subprocess", env={})
    with TestClient(app) as client, client.websocket_connect("/ws/chat") as ws:
        ws.send_json({"message": "plan my trip"})
        answer = ws.receive_json()
    assert answer["type"] == "answer" and answer["success"] is False
    assert "no LLM is configured" in answer["text"]
