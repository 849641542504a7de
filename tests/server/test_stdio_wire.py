"""Lines a stdio client sends that are not MCP messages: each gets a JSON-RPC error
(never silence, which left a client waiting for ever), a line past the size limit is
skipped without being held whole, and the server keeps serving."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import serve_argv

WAIT = 60.0
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


class Raw:
    """``codemode serve`` over stdio, written to and read from line by line."""

    def __init__(self, base: Path, env: dict[str, str] | None = None) -> None:
        argv = serve_argv(base, "--executor", "subprocess")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
        self.buf = b""

    def send(self, line: bytes | dict[str, Any]) -> None:
        data = json.dumps(line).encode() if isinstance(line, dict) else line
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def recv(self, timeout: float = WAIT) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError(f"no answer within {timeout} s")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise AssertionError("the server closed stdout")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message

    def ask(self, line: bytes | dict[str, Any]) -> dict[str, Any]:
        self.send(line)
        return self.recv()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        finally:
            assert self.proc.stdout is not None
            self.proc.stdout.close()


@pytest.fixture
def raw(workspace: tuple[Path, Path]) -> Iterator[Raw]:
    r = Raw(workspace[0], {"CODEMODE_STDIO_MAX_MESSAGE_MB": "0.25"})
    try:
        assert r.ask(INIT)["id"] == 0
        r.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield r
    finally:
        r.close()


def ping(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "method": "ping"}


@pytest.mark.parametrize("line", [b"{not json", b"\xff\xfe", b'{"jsonrpc": "2.0", "id": 3'])
def test_a_line_that_is_not_json_is_a_parse_error_and_serving_goes_on(
    raw: Raw, line: bytes
) -> None:
    got = raw.ask(line)
    assert got["id"] is None and got["error"]["code"] == -32700
    assert raw.ask(ping(1)) == {"jsonrpc": "2.0", "id": 1, "result": {}}


@pytest.mark.parametrize(
    ("message", "answered_id"),
    [
        ({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": "x"}, 6),
        ({"jsonrpc": "1.0", "id": "r7", "method": "tools/list"}, "r7"),
        ({"jsonrpc": "2.0", "id": 8, "method": 12}, 8),
        ({"jsonrpc": "2.0", "id": None, "method": "tools/list"}, None),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "tools/list"}, None),
        ({"jsonrpc": "2.0", "id": 9}, None),  # a response of nothing: not our request's id
        ([], None),
        ([ping(10)], None),
    ],
)
def test_json_that_is_not_an_mcp_message_is_an_invalid_request_answered_with_its_id(
    raw: Raw, message: Any, answered_id: Any
) -> None:
    got = raw.ask(json.dumps(message).encode())
    assert got["id"] == answered_id and got["error"]["code"] == -32600, got
    assert raw.ask(ping(11))["result"] == {}


def test_blank_lines_are_ignored(raw: Raw) -> None:
    raw.send(b"   ")
    raw.send(b"")
    assert raw.ask(ping(12)) == {"jsonrpc": "2.0", "id": 12, "result": {}}


def test_a_message_over_the_limit_is_refused_with_its_id_and_the_next_one_is_served(
    raw: Raw,
) -> None:
    big = {"jsonrpc": "2.0", "id": 13, "method": "tools/call"}
    code = "x = 1\n" * 100_000  # 600 KB: over the 0.25 MiB this server takes
    big["params"] = {"name": "run_code", "arguments": {"code": code}}
    got = raw.ask(json.dumps(big).encode())
    assert got["id"] == 13 and got["error"]["code"] == -32600
    assert "CODEMODE_STDIO_MAX_MESSAGE_MB" in got["error"]["message"]
    assert raw.ask(ping(14))["result"] == {}


def test_a_message_under_the_limit_still_runs(raw: Raw) -> None:
    code = "x = 1\n" * 20_000 + "print(x)"  # 120 KB
    call = {"name": "run_code", "arguments": {"code": code}}
    got = raw.ask({"jsonrpc": "2.0", "id": 15, "method": "tools/call", "params": call})
    assert got["id"] == 15 and got["result"]["content"][0]["text"].strip() == "1"


def test_a_request_past_the_in_flight_cap_is_answered_at_once_and_later_ones_are_served(
    workspace: tuple[Path, Path],
) -> None:
    r = Raw(workspace[0], {"CODEMODE_STDIO_MAX_IN_FLIGHT": "2"})
    try:
        assert r.ask(INIT)["id"] == 0
        r.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        slow = {
            "name": "run_code",
            "arguments": {"code": "import time; time.sleep(3); print('ok')"},
        }
        for n in (20, 21):
            r.send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": slow})
        refused = r.ask(ping(22))
        assert refused["id"] == 22 and refused["error"]["code"] == -32000
        assert "CODEMODE_STDIO_MAX_IN_FLIGHT" in refused["error"]["message"]
        r.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}})
        answers = {m["id"]: m for m in (r.recv(), r.recv())}
        assert set(answers) == {20, 21}
        assert all(not a["result"].get("isError") for a in answers.values())
        assert r.ask(ping(23)) == {"jsonrpc": "2.0", "id": 23, "result": {}}
    finally:
        r.close()


def _capped(workspace: tuple[Path, Path], most: int) -> Raw:
    r = Raw(workspace[0], {"CODEMODE_STDIO_MAX_IN_FLIGHT": str(most)})
    assert r.ask(INIT)["id"] == 0
    r.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return r


def _sleep_call(n: int | str, seconds: float) -> dict[str, Any]:
    code = f"import time; time.sleep({seconds}); print('ok')"
    params = {"name": "run_code", "arguments": {"code": code}}
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}


def test_a_request_cancelled_by_its_id_as_a_string_frees_its_slot(
    workspace: tuple[Path, Path],
) -> None:
    # The SDK reads "30" and 30 as one id (as the TS SDK does): it cancels the call and
    # never answers it, so the slot must be freed too, or the server ends up refusing all.
    r = _capped(workspace, 1)
    try:
        r.send(_sleep_call(30, 60))
        time.sleep(0.5)
        cancel = {"requestId": "30", "reason": "timed out"}
        r.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        assert r.ask(ping(31)) == {"jsonrpc": "2.0", "id": 31, "result": {}}
    finally:
        r.close()


def test_requests_that_reuse_an_id_each_take_a_slot(workspace: tuple[Path, Path]) -> None:
    # The SDK runs and answers each of them: counted as one, the cap held nothing back.
    r = _capped(workspace, 2)
    try:
        for _ in range(2):
            r.send(_sleep_call(40, 2))
        refused = r.ask(ping(40))
        assert refused["id"] == 40 and refused["error"]["code"] == -32000, refused
        answers = [r.recv(), r.recv()]
        assert all(a["id"] == 40 and "result" in a for a in answers), answers
        assert r.ask(ping(41)) == {"jsonrpc": "2.0", "id": 41, "result": {}}
    finally:
        r.close()


@pytest.mark.parametrize("request_id", [[1], {"a": 1}, None])
def test_a_cancel_naming_no_usable_id_is_ignored(raw: Raw, request_id: Any) -> None:
    cancel = {"requestId": request_id}
    raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
    assert raw.ask(ping(42)) == {"jsonrpc": "2.0", "id": 42, "result": {}}


def test_a_message_over_the_limit_with_its_id_last_is_refused_with_its_id(raw: Raw) -> None:
    # Serializers that put "id" after "params" are common: answered with a null id, the
    # client would wait for its request's answer for ever.
    code = "x = 1\n" * 100_000  # 600 KB: over the 0.25 MiB this server takes
    params = {"name": "run_code", "arguments": {"code": code, "note": {"id": 99}}}
    line = json.dumps({"jsonrpc": "2.0", "method": "tools/call", "params": params, "id": 16})
    got = raw.ask(line.encode() + b"\r")
    assert got["id"] == 16 and got["error"]["code"] == -32600, got
    inner = {"jsonrpc": "2.0", "method": "tools/call", "params": params}
    got = raw.ask(json.dumps(inner).encode())  # no id of its own: the nested one is not it
    assert got["id"] is None and got["error"]["code"] == -32600, got
    assert raw.ask(ping(17))["result"] == {}


def test_a_progress_token_too_long_to_repeat_is_refused_with_its_id(raw: Raw) -> None:
    call = {"name": "run_code", "arguments": {"code": "print(1)"}}
    params = {**call, "_meta": {"progressToken": "t" * 100_000}}
    got = raw.ask({"jsonrpc": "2.0", "id": 40, "method": "tools/call", "params": params})
    assert got["id"] == 40 and got["error"]["code"] == -32602, got
    assert "progressToken of 100,000 characters" in got["error"]["message"]
    params = {**call, "_meta": {"progressToken": "t" * 1024}}
    raw.send({"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": params})
    got = raw.recv()
    while "id" not in got:  # its live output first, each note naming the token
        assert got["params"]["progressToken"] == "t" * 1024, got
        got = raw.recv()
    assert got["id"] == 41 and "result" in got, got


def test_a_client_that_cancels_each_request_and_reads_nothing_is_no_longer_read_from(
    workspace: tuple[Path, Path],
) -> None:
    # Each cancel freed its request's slot while its answer waited for the unread pipe:
    # 30,000 such pairs grew the server to 2 GB. Now unwritten answers hold slots too.
    r = _capped(workspace, 4)
    pairs = 3000
    written = [0]

    def flood() -> None:
        assert r.proc.stdin is not None
        try:
            for n in range(100, 100 + pairs):
                cancel = {"requestId": n}
                for message in (
                    {"jsonrpc": "2.0", "id": n, "method": "tools/list"},
                    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel},
                ):
                    r.proc.stdin.write(json.dumps(message).encode() + b"\n")
                r.proc.stdin.flush()
                written[0] += 1
        except (BrokenPipeError, ValueError, OSError):
            pass  # the server was stopped at the end of the test

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    try:
        last, still = -1, 0.0
        deadline = time.monotonic() + WAIT
        while still < 3 and time.monotonic() < deadline:  # until the writer is held back
            time.sleep(0.5)
            still = still + 0.5 if written[0] == last else 0.0
            last = written[0]
        assert written[0] < pairs, "the server read every request of a client that reads nothing"
    finally:
        r.proc.kill()
        r.proc.wait()
        thread.join(timeout=10)
        for pipe in (r.proc.stdin, r.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
