"""``codemode audit verify`` detects edited, deleted, reordered and cut-off lines (exit 1)
and passes a whole chain, across rotated files and several writing processes; ``tail``
and ``search`` read it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.anyio

READS = "for i in range(6):\n    tools.notes.read_note(name='hello')"


@pytest.fixture
async def written(audited: Any, open_notes: Any) -> Any:
    """An audited workspace whose log holds one run of six tool calls (seven lines)."""
    audited.ws.configure({"audit": audited.config()})
    async with open_notes(audited.ws) as s:
        await s.run(READS)
    assert len(audited.records()) == 7
    return audited


def lines_of(audited: Any) -> list[str]:
    text: str = audited.log.read_text()
    return text.splitlines(keepends=True)


def rewrite(audited: Any, lines: list[str]) -> None:
    audited.log.write_text("".join(lines))


async def test_an_untouched_log_verifies(written: Any) -> None:
    proc = written.cli("verify")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: 7 records, chain whole up to seq 7")


async def test_an_edited_line_is_detected(written: Any) -> None:
    lines = lines_of(written)
    lines[2] = lines[2].replace('"outcome":"ok"', '"outcome":"error"')
    rewrite(written, lines)
    proc = written.cli("verify")
    assert proc.returncode == 1
    assert "BROKEN: audit.jsonl:3: the line was changed" in proc.stderr


async def test_a_deleted_line_is_detected(written: Any) -> None:
    lines = lines_of(written)
    del lines[2]
    rewrite(written, lines)
    proc = written.cli("verify")
    assert proc.returncode == 1
    assert "audit.jsonl:3: the chain breaks at seq 4: 1 line(s) before it are missing" in (
        proc.stderr
    )


async def test_lines_cut_off_the_end_are_detected_by_the_head(written: Any) -> None:
    rewrite(written, lines_of(written)[:-2])
    proc = written.cli("verify")
    assert proc.returncode == 1
    assert "the log ends at seq 5 but its head" in proc.stderr
    assert "2 line(s) were cut off the end" in proc.stderr


async def test_lines_cut_off_the_start_are_detected_by_the_head(written: Any) -> None:
    rewrite(written, lines_of(written)[3:])
    proc = written.cli("verify")
    assert proc.returncode == 1
    assert "the log starts at seq 4 but its head" in proc.stderr
    assert "3 line(s) were cut off its start" in proc.stderr


async def test_a_rotated_file_removed_by_hand_is_detected_but_not_one_keep_removed(
    audited: Any, open_notes: Any
) -> None:
    audited.ws.configure({"audit": audited.config(max_bytes=1500, keep=2)})
    async with open_notes(audited.ws) as s:
        for _ in range(3):
            await s.run(READS)
    kept = audited.cli("verify")
    assert kept.returncode == 0, kept.stderr
    rotated = sorted(audited.log.parent.glob("audit.0*.jsonl"))
    assert len(rotated) == 2  # keep removed the others
    rotated[0].unlink()
    proc = audited.cli("verify")
    assert proc.returncode == 1 and "were cut off its start" in proc.stderr


async def test_a_half_written_last_line_is_detected(written: Any) -> None:
    lines = lines_of(written)
    lines[-1] = lines[-1][:40]
    rewrite(written, lines)
    proc = written.cli("verify")
    assert proc.returncode == 1
    assert "audit.jsonl:7: the last line is cut (no newline at its end)" in proc.stderr


async def test_swapped_lines_and_a_forged_line_are_detected(written: Any) -> None:
    lines = lines_of(written)
    lines[1], lines[2] = lines[2], lines[1]
    forged = json.loads(lines[4])
    forged["tool"] = "delete_note"
    lines[4] = json.dumps(forged, sort_keys=True, separators=(",", ":")) + "\n"
    rewrite(written, lines)
    proc = written.cli("verify")
    assert proc.returncode == 1
    assert "audit.jsonl:2: the chain breaks" in proc.stderr
    assert "audit.jsonl:5: not a signed audit line" in proc.stderr or (
        "audit.jsonl:5: the line was changed" in proc.stderr
    )


async def test_verify_with_another_key_fails_and_says_the_key_may_differ(written: Any) -> None:
    import os

    env = {**os.environ, "CODEMODE_AUDIT_KEY": "another-key-0123456789abcdef"}
    argv = [sys.executable, "-m", "codemode", "audit", "verify", "--base", str(written.ws.base)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 1
    assert "or the key from $CODEMODE_AUDIT_KEY is not the one it was written with" in proc.stderr


async def test_tail_and_search_read_the_log(written: Any) -> None:
    tail = written.cli("tail", "-n", "2")
    assert tail.returncode == 0, tail.stderr
    shown = tail.stdout.splitlines()
    assert len(shown) == 2 and "#7  run" in shown[-1] and "#6  tool" in shown[0]
    found = written.cli("search", "--kind", "tool", "--tool", "notes.read_*", "--json")
    records = [json.loads(line) for line in found.stdout.splitlines()]
    assert [r["seq"] for r in records] == [1, 2, 3, 4, 5, 6]
    none = written.cli("search", "--outcome", "denied")
    assert none.stdout.strip() == "No matching records."


async def test_the_chain_continues_across_rotated_files_and_keep_removes_the_oldest(
    audited: Any, open_notes: Any
) -> None:
    audited.ws.configure({"audit": audited.config(max_bytes=1500)})
    async with open_notes(audited.ws) as s:
        await s.run(READS)
        await s.run(READS)
    files = sorted(p.name for p in audited.log.parent.glob("audit*.jsonl"))
    assert len(files) >= 3 and "audit.jsonl" in files
    whole = audited.cli("verify")
    assert whole.returncode == 0 and "ok: 14 records" in whole.stdout
    audited.ws.configure({"audit": audited.config(max_bytes=1500, keep=2)})
    async with open_notes(audited.ws) as s:
        await s.run(READS)
    kept = audited.cli("verify")
    assert kept.returncode == 0, kept.stderr
    assert "note: the chain starts at seq" in kept.stdout


WRITER = """
import sys
from pathlib import Path
from codemode.audit.keys import Keys
from codemode.audit.log import AuditLog
log = AuditLog(Path(sys.argv[1]), Keys.derive(sys.argv[3].encode(), "test"),
               head=Path(sys.argv[2]), max_bytes=4000)
for i in range(150):
    name = sys.argv[4] + str(i)
    log.append({"kind": "memory", "op": "put", "record_kind": "state", "name": name})
"""


def test_several_processes_extend_one_chain(audited: Any) -> None:
    from .conftest import KEY

    audited.ws.configure({"audit": audited.config(max_bytes=4000)})
    args = [str(audited.log), str(audited.head), KEY]
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, *args, name]) for name in ("a", "b", "c")
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0]
    proc = audited.cli("verify")
    assert proc.returncode == 0, proc.stderr
    assert "ok: 450 records" in proc.stdout
    assert len(list(Path(audited.log.parent).glob("audit.*.jsonl"))) > 1


def test_a_stderr_sink_gets_a_copy_of_every_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from codemode.audit.keys import Keys
    from codemode.audit.log import AuditLog

    log = AuditLog(
        tmp_path / "a.jsonl",
        Keys.derive(b"k" * 32, "test"),
        head=tmp_path / "h",
        max_bytes=10_000,
        sinks=("stderr", "syslog"),
    )
    log.append({"kind": "memory", "op": "put", "record_kind": "state", "name": "x"})
    log.close()
    copied = capfd.readouterr().err
    assert copied == (tmp_path / "a.jsonl").read_text()
    assert json.loads(copied)["seq"] == 1


CONTROL = "\x1b[2K\r\x1b[1A\u202e\x85"
"""Erase the line, go up one, reverse the text, a C1 newline: what a listing must not obey."""


async def test_tail_and_search_show_the_codes_control_characters_as_escapes(
    audited: Any, open_notes: Any
) -> None:
    audited.ws.configure({"audit": audited.config()})
    # A CR would end the cell's line for Python too: the comment has the others.
    cell = f"x = 1  # {CONTROL.replace(chr(13), '')}\nraise type({CONTROL!r}, (Exception,), {{}})()"
    async with open_notes(audited.ws) as s:
        result = await s.run(cell)
    assert result.error is not None
    for args in (("tail",), ("search", "--kind", "run"), ("tail", "--json")):
        proc = audited.cli(*args)
        assert proc.returncode == 0, proc.stderr
        assert not set("\x1b\r\u202e\x85") & set(proc.stdout), (args, proc.stdout)
        assert "\\u001b[2K" in proc.stdout
    [record] = [json.loads(line) for line in audited.cli("tail", "--json").stdout.splitlines()]
    assert record["error_type"] == CONTROL  # the JSON still holds the true value


async def test_a_stray_file_whose_name_only_looks_rotated_is_left_alone(written: Any) -> None:
    (written.log.parent / "audit.\u00b2\u00b3.jsonl").write_text("not a log\n")
    proc = written.cli("verify")
    assert proc.returncode == 0, proc.stderr


async def test_a_run_whose_code_holds_a_lone_surrogate_is_recorded_and_verifies(
    audited: Any, open_notes: Any
) -> None:
    """A client's JSON can carry ``"\\ud800"``, which no UTF-8 text can: the worker refuses
    such code, and the audit records the attempt (escaped) instead of failing the run
    with an encoding error and writing nothing."""
    audited.ws.configure({"audit": audited.config()})
    async with open_notes(audited.ws) as s:
        refused = await s.run("x = '\ud800'\n1")
        after = await s.run("tools.notes.write_note(name='n' + chr(0xDCFF), text='x')")
    assert refused.error is not None and "surrogate" in refused.error.message
    assert after.error is not None
    records = audited.records()
    assert [(r["kind"], r["outcome"]) for r in records] == [("run", "error"), ("run", "error")]
    assert "\\ud800" in audited.log.read_text()  # escaped: the line stays UTF-8
    for args in (("verify",), ("tail",), ("tail", "--json"), ("search", "--kind", "run")):
        proc = audited.cli(*args)
        assert proc.returncode == 0, (args, proc.stdout + proc.stderr)
