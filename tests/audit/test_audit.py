"""The audit log records every run, tool call and memory write, with what the policy,
the approval and the budget decided, and never a plain value of the arguments."""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path
from typing import Any

import pytest

from codemode.approval import ApprovalRequest
from codemode.audit.log import canonical
from codemode.errors import ConfigError
from codemode.tools.registry import NextCall, ToolCall
from codemode.workspace import Workspace

from .conftest import KEY

pytestmark = pytest.mark.anyio

STORY = """
outcomes = []
try:
    tools.notes.delete_note(name="hello")
except ToolDenied as e:
    outcomes.append(e.reason)
outcomes.append(tools.notes.write_note(name="plan", text="secret plan"))
try:
    tools.notes.broken()
except ToolError as e:
    outcomes.append("tool error")
outcomes.append(tools.notes.read_note(name="plan"))
try:
    tools.notes.read_note(name="plan")
except BudgetExceeded as e:
    outcomes.append(e.budget)
artifacts.save("report", {"n": 1})
outcomes
"""


def args_hmac(args: dict[str, Any]) -> str:
    key = hmac.digest(KEY.encode(), b"codemode-audit-args", hashlib.sha256)
    return hmac.digest(key, canonical(args), hashlib.sha256).hex()


async def test_a_run_with_a_denial_an_approval_a_tool_error_and_a_budget_is_recorded_whole(
    audited: Any, open_notes: Any
) -> None:
    audited.ws.configure(
        {
            "policy": {
                "rules": [
                    {"tools": "notes.delete_note", "action": "deny"},
                    {"tools": "notes.write_note", "action": "ask"},
                ]
            },
            "budget": {"run": {"tool_calls": 3}},
            "audit": audited.config(),
        }
    )

    async def yes(request: ApprovalRequest) -> bool:
        return True

    async with open_notes(audited.ws, approve=yes) as s:
        result = await s.run(STORY)
    assert result.value == ["policy", "ok", "tool error", "secret plan", "budget.run.tool_calls"]
    records = audited.records()
    tools = [r for r in records if r["kind"] == "tool"]
    runs = [r for r in records if r["kind"] == "run"]
    memory = [r for r in records if r["kind"] == "memory"]
    assert [(t["tool"], t["outcome"]) for t in tools] == [
        ("delete_note", "denied"),
        ("write_note", "ok"),
        ("broken", "error"),
        ("read_note", "ok"),
        ("read_note", "budget"),
    ]
    denied, approved, failed, read, over = tools
    assert (denied["policy"], denied["reason"], denied["error_type"]) == (
        "deny",
        "policy",
        "ToolDenied",
    )
    assert (approved["policy"], approved["approval"], approved["bytes"]) == ("ask", "approved", 2)
    assert failed["error_type"] == "ToolError"
    assert read["budget"]["run.tool_calls"] == [3, 3]
    assert (over["error_type"], over["reason"]) == ("BudgetExceeded", "budget")
    [run] = runs
    assert run["outcome"] == "ok" and run["code"] == STORY
    assert run["code_sha256"] == hashlib.sha256(STORY.encode()).hexdigest()
    assert run["duration_ms"] > 0
    for r in records:
        assert (r["tenant"], r["session"], r["run"]) == (
            "default",
            s.context.session_id,
            run["run"],
        )
    assert [(m["op"], m["record_kind"], m["name"]) for m in memory] == [
        ("put", "artifacts", "report")
    ]
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert audited.cli("verify").returncode == 0


async def test_arguments_are_recorded_as_a_keyed_hmac_never_in_plain_or_as_a_plain_digest(
    audited: Any, open_notes: Any
) -> None:
    audited.ws.configure({"audit": audited.config()})
    async with open_notes(audited.ws) as s:
        await s.run("tools.notes.write_note(name='pin', text='4711')")
    raw = audited.log.read_text()
    [call] = [r for r in audited.records() if r["kind"] == "tool"]
    args = {"name": "pin", "text": "4711"}
    assert call["args_hmac"] == args_hmac(args)
    assert call["args_hmac"] != hashlib.sha256(canonical(args)).hexdigest()
    assert '"4711"' not in raw.replace("text='4711'", "")  # only in the run's code


async def test_the_audit_stage_sees_the_arguments_before_privacy_restores_them(
    audited: Any,
) -> None:
    """Privacy sits inside audit: a layer at the privacy stage rewrites tokens to values,
    and the log holds the HMAC of the tokens."""
    audited.ws.configure({"audit": audited.config()})
    ws = Workspace.open(audited.ws.base)
    registry = ws.registry()

    async def restore(call: ToolCall, call_next: NextCall) -> Any:
        call.args = {k: v.replace("<NAME_1>", "hello") for k, v in call.args.items()}
        return await call_next(call)

    registry.use(restore, "privacy")
    try:
        value = await registry.call("notes", "read_note", {"name": "<NAME_1>"})
    finally:
        await registry.aclose()
    assert value == "hello world"
    [call] = audited.records()
    assert call["args_hmac"] == args_hmac({"name": "<NAME_1>"})


async def test_memory_writes_from_any_door_are_recorded(audited: Any, open_notes: Any) -> None:
    audited.ws.configure({"audit": audited.config()})
    code = "skills.create('twice', 'def run(x):\\n    return 2 * x', description='d')\n"
    code += "state.set('cursor', 3)\nartifacts.save('a', b'xyz')\nartifacts.delete('a')"
    async with open_notes(audited.ws) as s:
        result = await s.run(code)
        await s.memory.state.set("from_sdk", 1)
    assert result.error is None, result.error
    memory = [
        (r["op"], r["record_kind"], r["name"]) for r in audited.records() if r["kind"] == "memory"
    ]
    assert ("put", "skills", "twice") in memory
    assert ("put", "artifacts", "a") in memory and ("delete", "artifacts", "a") in memory
    states = [m for m in memory if m[1] == "state"]
    assert len(states) == 2  # one from the code, one from the SDK


def test_without_a_key_the_audit_refuses_to_start_and_says_how_to_get_one(
    audited: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.delenv("CODEMODE_AUDIT_KEY")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "empty-config"))
    audited.ws.configure({"audit": audited.config(max_code_bytes=7)})
    with pytest.raises(
        ConfigError, match=r"audit is enabled but has no key.*codemode audit keygen"
    ):
        Workspace.open(audited.ws.base).registry()


async def test_a_key_or_head_file_inside_the_workspace_is_refused(
    audited: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CODEMODE_AUDIT_KEY")
    key = audited.ws.base / "files" / "audit.key"
    key.parent.mkdir()
    key.write_text(KEY)
    audited.ws.configure({"audit": audited.config(key_file=str(key))})
    registry = Workspace.open(audited.ws.base).registry()
    try:
        with pytest.raises(ConfigError, match=r"key file .* is inside the workspace"):
            await registry.call("notes", "read_note", {"name": "hello"})
    finally:
        await registry.aclose()
    assert audited.ws.calls() == []


async def test_the_sandbox_can_read_neither_the_key_nor_the_log(
    audited: Any, open_notes: Any
) -> None:
    import shutil

    from codemode.execution.sandbox import SandboxExecutor

    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    audited.ws.configure({"audit": audited.config()})
    ws = Workspace.open(audited.ws.base)
    code = f"""
import os
seen = [k for k, v in os.environ.items() if {KEY!r} in v or "AUDIT" in k]
found = []
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/dev")]
    found += [os.path.join(root, f) for f in files if f in ("audit.jsonl", "audit.head")]
(seen, found)
"""
    async with open_notes(audited.ws, executor=SandboxExecutor.for_workspace(ws)) as s:
        await s.run("tools.notes.read_note(name='hello')")
        result = await s.run(code, timeout=120)
    assert result.error is None, result.error
    assert result.value == [[], []]
    assert audited.log.exists() and audited.head.exists()


async def test_a_refused_call_is_recorded_even_when_nothing_reached_the_server(
    audited: Any, open_notes: Any
) -> None:
    audited.ws.configure({"policy": {"default": "deny"}, "audit": audited.config()})
    async with open_notes(audited.ws) as s:
        result = await s.run("tools.notes.read_note(name='hello')")
    assert result.error is not None and result.error.type == "ToolDenied"
    tool, run = audited.records()
    assert (tool["outcome"], tool["policy"]) == ("denied", "deny")
    assert (run["outcome"], run["error_type"]) == ("error", "ToolDenied")
    assert audited.ws.calls() == []


def test_keygen_writes_through_no_link_planted_beside_the_key(tmp_path: Path) -> None:
    """Its temporary file was named by the pid: a symlink planted there (a directory a
    server may write) made ``codemode audit keygen`` write the key over its target."""
    from codemode.audit.keys import keygen

    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / f".audit.key.{os.getpid()}.tmp").symlink_to(victim)
    key = keygen(tmp_path / "audit.key")
    assert victim.read_text() == "precious" and len(key.read_text().strip()) == 64


async def test_a_call_made_between_runs_names_the_run_that_left_its_thread_running(
    audited: Any, open_notes: Any, tmp_path: Path
) -> None:
    import anyio

    audited.ws.configure({"audit": audited.config()})
    done = tmp_path / "thread-done"
    code = (
        "import threading, time\n"
        "def later():\n"
        "    time.sleep(0.5)\n"
        "    tools.notes.read_note(name='hello')\n"
        f"    open({str(done)!r}, 'w').close()\n"
        "threading.Thread(target=later, daemon=True).start()"
    )
    async with open_notes(audited.ws) as s:
        first = await s.run(code)
        with anyio.fail_after(20):
            while not done.exists():
                await anyio.sleep(0.05)
    assert first.error is None, first.to_text()
    [run] = [r for r in audited.records() if r["kind"] == "run"]
    [call] = [r for r in audited.records() if r["kind"] == "tool"]
    assert "run" not in call and call["after_run"] == run["run"]
    assert call["session"] == run["session"]


async def test_a_call_made_before_the_first_run_names_the_sessions_start(
    audited: Any, open_notes: Any, tmp_path: Path
) -> None:
    """What a restored checkpoint starts calls before any run: the audit says so."""
    import anyio

    from codemode.checkpoint import Checkpoints
    from codemode.storage import FileStorage

    audited.ws.configure({"audit": audited.config()})
    done = tmp_path / "thread-done"
    code = (
        "class Starter:\n"
        "    def __setstate__(self, state):\n"
        "        import threading\n"
        "        self.__dict__.update(state)\n"
        "        threading.Thread(target=self.later, daemon=True).start()\n"
        "    def later(self):\n"
        "        import time\n"
        "        time.sleep(0.5)\n"
        "        tools.notes.read_note(name='hello')\n"
        f"        open({str(done)!r}, 'w').close()\n"
        "starter = Starter()\n"
        "starter.x = 1\n"
    )
    store = Checkpoints(FileStorage(tmp_path / "store"), "agent-early")
    async with open_notes(audited.ws, checkpoints=store) as s:
        assert (await s.run(code)).error is None
    async with open_notes(audited.ws, checkpoints=store) as s:
        await s.start()
        with anyio.fail_after(20):
            while not done.exists():
                await anyio.sleep(0.05)
        session = s.context.session_id
    [call] = [r for r in audited.records() if r["kind"] == "tool"]
    assert "run" not in call and call["session"] == session
    assert call["after_run"] == f"{session}:start"
