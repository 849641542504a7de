"""A chat backend that gives its assistant code mode: FastAPI, one WebSocket per user.

The integration guide's setup (a WebSocket chat service in front of an assistant), with
codemode doing the work: each connection gets its own agent, whose session (variables,
tools, skills) lives as long as the connection. The client sends ``{"message": "..."}``
and receives step events while the agent works, then the answer::

    {"type": "step", "kind": "code", "step": 1, "text": "rows = tools.sheets..."}
    {"type": "step", "kind": "output", "step": 1, "text": "3 rows", "ok": true}
    {"type": "answer", "success": true, "text": "...", "steps": 2, "tokens": 1834}

Run it (the model and the workspace come from the usual settings, e.g. OPENAI_API_KEY):

    pip install 'codemode[agent,examples]' uvicorn
    CODEMODE_BASE=~/.codemode uvicorn app:app --app-dir examples/chat_backend --port 8000
"""

from __future__ import annotations

import os
from typing import Any

import anyio
from fastapi import FastAPI, WebSocket, WebSocketDisconnect

from codemode.agent import AgentEvent, create_agent


def build_app(**agent_settings: Any) -> FastAPI:
    """The app; ``agent_settings`` go to ``create_agent`` for every connection."""
    app = FastAPI(title="codemode chat backend")

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.websocket("/ws/chat")
    async def chat(websocket: WebSocket) -> None:
        await websocket.accept()
        agent = create_agent(**agent_settings)
        try:
            while True:
                incoming = await websocket.receive_json()
                message = incoming.get("message") if isinstance(incoming, dict) else None
                if not isinstance(message, str) or not message.strip():
                    await websocket.send_json(
                        {"type": "error", "text": 'send {"message": "..."} with a non-empty text'}
                    )
                    continue

                async def forward(event: AgentEvent) -> None:
                    if event.kind in ("code", "output"):
                        await websocket.send_json(
                            {
                                "type": "step",
                                "kind": event.kind,
                                "step": event.step,
                                "text": event.text,
                                "ok": event.ok,
                            }
                        )

                result = await agent.aexecute_task(message, on_event=forward)
                await websocket.send_json(
                    {
                        "type": "answer",
                        "success": result.success,
                        "text": result.result if result.success else result.error,
                        "steps": len(result.steps),
                        "tokens": result.usage.total_tokens,
                    }
                )
        except WebSocketDisconnect:
            pass
        finally:
            # The connection may be gone because this task was cancelled: close anyway,
            # or the agent's worker process would outlive the chat.
            with anyio.CancelScope(shield=True):
                await agent.aclose()

    return app


app = build_app(base=os.environ.get("CODEMODE_BASE"))
