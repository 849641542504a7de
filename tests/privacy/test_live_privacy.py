"""Every way a run's output reaches the model goes through privacy: the chunks streamed
while it runs (``on_output``, ``Session.stream``, ``codemode serve``'s progress notes),
the final output, stderr, error tracebacks and the structured value. The values here are
built by the code itself (no tool result to tokenize them first), and printed in pieces
so that each one is split across two chunks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codemode.live import OutputChunk
from codemode.privacy.tokens import TOKEN_RE
from codemode.result import ExecutionResult

from .conftest import PrivateWorkspace, make_private_workspace
from .test_serve_privacy import captured_serve, text_of
from .test_session_privacy import opened

pytestmark = pytest.mark.anyio

EMAIL = "zoe.miller@example.org"
PHONE = "+44 20 7946 0958"
CARD = "4111 1111 1111 1111"
SECRETS = (EMAIL, PHONE, CARD)

# Each value is glued together at run time and printed in two pieces with a pause
# between them: the worker sends the first piece at once, the second later.
SPLIT = """
import sys, time
parts = {
    "email": ("zoe.mi", "ller@example.org"),
    "phone": ("+44 20 79", "46 0958"),
    "card": ("4111 1111 11", "11 1111"),
}
for name, (a, b) in parts.items():
    print(f"{name}: {a}", end="", flush=True)
    time.sleep(0.3)
    print(f"{b} (done)", flush=True)
print("on stderr: zoe.mi", end="", file=sys.stderr, flush=True)
time.sleep(0.3)
print("ller@example.org", file=sys.stderr, flush=True)
"""


def leaks(text: str) -> list[str]:
    return [v for v in SECRETS if v in text]


async def chunks_of(ws: PrivateWorkspace, code: str) -> tuple[list[tuple[str, str]], Any]:
    chunks: list[tuple[str, str]] = []
    async with opened(ws) as s:
        result = await s.run(code, on_output=lambda stream, text: chunks.append((stream, text)))
    return chunks, result


async def test_a_value_split_across_two_chunks_reaches_the_listener_as_one_token(
    tmp_path: Path,
) -> None:
    # Without privacy the run really does split each value between two chunks...
    plain, _ = await chunks_of(make_private_workspace(tmp_path / "off", privacy=False), SPLIT)
    ends = ("zoe.mi", "+44 20 79", "4111 1111 11")
    assert any(t.endswith(ends) for _, t in plain), plain
    # ...and with privacy on, no chunk holds a value or a piece of one.
    chunks, result = await chunks_of(make_private_workspace(tmp_path / "on"), SPLIT)
    streamed = {"stdout": "", "stderr": ""}
    for stream, text in chunks:
        assert "zoe.mi" not in text and "79" not in text and "4111" not in text, chunks
        streamed[stream] += text
    # The stream says what the result says: the same tokens for the same values.
    assert streamed["stdout"] == result.stdout
    assert streamed["stderr"] == result.stderr
    assert len(TOKEN_RE.findall(result.stdout)) == 3
    assert "[EMAIL_" in result.stderr and leaks(result.stderr) == []


async def test_complete_lines_are_streamed_while_the_run_still_goes(tmp_path: Path) -> None:
    # The code waits (bounded) for a file the listener writes when it has received the
    # first line: it prints "live" only if that line left before the run ended.
    ws = make_private_workspace(tmp_path)
    flag = tmp_path / "got-first-line"
    code = (
        "import os, time\n"
        f"print('first line to {EMAIL[:3]}', flush=True)\n"
        "deadline = time.monotonic() + 60\n"
        f"while not os.path.exists({str(flag)!r}) and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        f"print('live' if os.path.exists({str(flag)!r}) else 'late')\n"
    )
    got: list[str] = []

    def listener(stream: str, text: str) -> None:
        got.append(text)
        if "first line" in "".join(got):
            flag.touch()

    async with opened(ws) as s:
        result = await s.run(code, on_output=listener)
    assert result.stdout.endswith("live\n"), result.stdout


async def test_session_stream_yields_scanned_chunks_then_the_result(
    private_ws: PrivateWorkspace,
) -> None:
    items: list[OutputChunk | ExecutionResult] = []
    async with opened(private_ws) as s:
        async for item in s.stream(SPLIT):
            items.append(item)
    *chunks, result = items
    assert isinstance(result, ExecutionResult)
    assert all(isinstance(c, OutputChunk) for c in chunks) and len(chunks) >= 2
    for stream in ("stdout", "stderr"):
        text = "".join(c.text for c in chunks if isinstance(c, OutputChunk) and c.stream == stream)
        assert text == getattr(result, stream)
    assert leaks(repr(items)) == [] and len(TOKEN_RE.findall(result.stdout)) == 3


async def test_an_error_and_its_traceback_come_back_tokenized(
    private_ws: PrivateWorkspace,
) -> None:
    code = f"e = {EMAIL[:4]!r} + {EMAIL[4:]!r}\nraise ValueError('no account for ' + e)"
    async with opened(private_ws) as s:
        result = await s.run(code, on_output=lambda stream, text: None)
    assert result.error is not None
    assert "no account for [EMAIL_" in result.error.message
    assert leaks(result.error.message + result.error.traceback + result.stderr) == []


async def test_serve_sends_progress_notes_results_and_errors_with_tokens_only(
    tmp_path: Path,
) -> None:
    ws = make_private_workspace(tmp_path, privacy=None)  # on by --privacy alone
    capture = tmp_path / "to_client.jsonl"
    notes: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append(message or "")

    value = f"x = {EMAIL[:5]!r} + {EMAIL[5:]!r}\n{{'contact': x, 'phone': {PHONE!r}}}"
    failing = f"import sys\nprint({CARD!r}, file=sys.stderr)\nraise KeyError({EMAIL!r})"
    async with captured_serve(ws, capture) as client:
        run = await client.call_tool("run_code", {"code": SPLIT}, progress_callback=on_progress)
        valued = await client.call_tool("run_code", {"code": value})
        failed = await client.call_tool("run_code", {"code": failing})
    sent = capture.read_text(encoding="utf-8")
    assert leaks(sent) == [], "a real value reached the client"
    streamed = "".join(notes)
    assert len(TOKEN_RE.findall(streamed)) >= 4 and "(done)" in streamed, notes
    assert TOKEN_RE.search(text_of(run))
    # The structured value and the error (message, traceback, stderr) as the model sees them.
    structured = json.dumps(valued.structured_content)
    assert "[EMAIL_" in structured and "[PHONE_" in structured, structured
    assert failed.is_error and "[EMAIL_" in text_of(failed) and "[CREDIT_CARD_" in text_of(failed)


async def test_tokenized_values_are_counted_in_the_metrics(private_ws: PrivateWorkspace) -> None:
    from codemode.observability import default_metrics

    def count(entity: str) -> float:
        value = default_metrics().registry.get_sample_value(
            "codemode_pii_tokenized_total", {"entity": entity}
        )
        return value or 0.0

    before = count("EMAIL"), count("PHONE")
    _, result = await chunks_of(private_ws, SPLIT)
    assert result.is_ok, result.error
    after = count("EMAIL"), count("PHONE")
    assert after[0] - before[0] >= 2 and after[1] - before[1] >= 1


def contact_of(customer_id: int) -> dict[str, str]:
    """A customer's contact details (a custom tool of an embedding program)."""
    return {"id": str(customer_id), "email": EMAIL, "note": f"call {PHONE}"}


async def test_a_custom_tool_called_by_the_client_answers_with_tokens(tmp_path: Path) -> None:
    from mcp import Client

    from codemode import Settings
    from codemode.server import create_server

    ws = make_private_workspace(tmp_path)
    server = create_server(Settings(executor="subprocess"), base=ws.base, custom_tools=[contact_of])
    async with server, Client(server.mcp) as client:
        direct = await client.call_tool("contact_of", {"customer_id": 7})
        from_code = await client.call_tool(
            "run_code", {"code": "tools.custom.contact_of(customer_id=7)"}
        )
    for result in (direct, from_code):
        assert not result.is_error, text_of(result)
        seen = text_of(result) + json.dumps(result.structured_content)
        assert leaks(seen) == [] and "[EMAIL_" in seen and "[PHONE_" in seen, seen
