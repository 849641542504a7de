"""A large text scanned with the scanner process gives exactly the in-process spans, a
scanner process that dies costs nothing but time, and it gets text only."""

from __future__ import annotations

import base64
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

from codemode.privacy import pool
from codemode.privacy.config import PrivacyConfig
from codemode.privacy.engine import Privacy, build_scanner
from codemode.privacy.quality import load_corpus
from codemode.privacy.splice import SEP
from codemode.privacy.vault import Vault
from codemode.privacy.walk import Leaves
from codemode.redact import forget_secrets, remember_secret

from .reference import random_rows

CORPUS = Path(__file__).parent / "corpus" / "corpus.jsonl"
CONFIG = PrivacyConfig(enabled=True, phone_regions=["US", "GB", "DE", "FR"])
ALONE = CONFIG.model_copy(update={"parallel": False})

pytestmark = pytest.mark.skipif(
    pool.pool_for(CONFIG.entities, CONFIG.phone_regions) is None, reason="one core"
)


@pytest.fixture(autouse=True)
def _fresh_pools() -> Iterator[None]:
    pool.shutdown()
    forget_secrets()
    yield
    pool.shutdown()
    forget_secrets()


def ready_pool() -> pool.ScanPool:
    got = pool.pool_for(CONFIG.entities, CONFIG.phone_regions)
    assert got is not None and got.ready()
    return got


def payloads() -> list[str]:
    rows = random_rows(11, 4000, secrets=True)
    corpus = [row["text"] for row in load_corpus(CORPUS)] * 4
    return [
        SEP.join(Leaves.collect(rows).texts),
        "\n".join(json.dumps(r) for r in rows),  # one long text: split at a line break
        SEP.join(corpus),
        "\n".join(corpus),
    ]


def test_the_scanner_process_finds_exactly_what_the_host_finds_alone() -> None:
    remember_secret("s3cr3t-Value-only-the-host-knows")  # the host's net, not the process's
    shared = ready_pool()
    for text in payloads():
        assert len(text) >= pool.POOL_MIN
        before = shared.done
        got = build_scanner(CONFIG).spans_raw(text)
        assert shared.done == before + 1  # it did scan part of this text
        assert got == build_scanner(ALONE).spans_raw(text)
        assert len(got) > 1000


def test_encoded_spans_the_process_answers_are_decoded_and_scanned_by_the_host() -> None:
    # The process answers where base64 decodes to text; only the host's net knows this
    # secret, so finding it in the process's part means the host scanned the decoded text.
    secret = "s3cr3t-Value-only-the-host-knows"
    remember_secret(secret)
    blob = base64.b64encode(secret.encode()).decode()
    mail = base64.b64encode(b"carol@example.org").decode()
    rows = [{"id": f"row {i}", "data": blob if i % 2 else mail} for i in range(8000)]
    text = SEP.join(Leaves.collect(rows).texts)
    ready_pool()
    got = build_scanner(CONFIG).spans_raw(text)
    assert got == build_scanner(ALONE).spans_raw(text)
    last = text.rindex(blob)
    assert (last, last + len(blob), "SECRET") in got
    assert [x for _, _, x in got].count("EMAIL") == 4000


def test_protect_of_a_large_result_is_the_same_with_the_scanner_process() -> None:
    rows = random_rows(12, 5000)
    key = os.urandom(32)
    ready_pool()
    got, report = Privacy(CONFIG, Vault(key)).protect(rows)
    want, want_report = Privacy(ALONE, Vault(key)).protect(rows)
    assert got == want
    assert report.found == want_report.found


def test_a_scanner_process_killed_while_scanning_loses_nothing_and_is_replaced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    shared = ready_pool()
    assert shared._proc is not None
    text = payloads()[0]
    want = build_scanner(ALONE).spans_raw(text)
    shared._proc.stdin = _Signalling(shared._proc, signal.SIGKILL)  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, logger="codemode.privacy.pool"):
        got = build_scanner(CONFIG).spans_raw(text)
    assert got == want
    assert shared.failures == 1
    assert "it stopped answering" in caplog.text
    assert "scanned in this process instead, nothing was missed" in caplog.text
    assert shared.ready()  # a new process for the next large result
    assert build_scanner(CONFIG).spans_raw(text) == want


def test_a_scanner_process_that_died_between_results_loses_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    shared = ready_pool()
    proc = shared._proc
    assert proc is not None
    text = payloads()[0]
    want = build_scanner(ALONE).spans_raw(text)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with caplog.at_level(logging.WARNING, logger="codemode.privacy.pool"):
        assert build_scanner(CONFIG).spans_raw(text) == want
    assert "the scanner process failed" in caplog.text


def test_the_scanner_process_gets_none_of_the_hosts_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CODEMODE_TEST_API_KEY", "sk-not-for-the-scanner")
    shared = ready_pool()
    assert shared._proc is not None
    environ = Path(f"/proc/{shared._proc.pid}/environ").read_bytes()
    assert b"sk-not-for-the-scanner" not in environ
    assert set(dict(v.split(b"=", 1) for v in environ.split(b"\0") if v)) <= {
        b"PATH",
        b"PYTHONPATH",
    }


def test_a_forked_child_starts_its_own_scanner_process() -> None:
    parent = ready_pool()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a new pool, the parent's process untouched
        child = pool.pool_for(CONFIG.entities, CONFIG.phone_regions)
        ok = child is not parent and child is not None and child._proc is None
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.close(read)
    os.waitpid(pid, 0)
    assert parent.ready()
    assert build_scanner(CONFIG).spans_raw(payloads()[0]) == build_scanner(ALONE).spans_raw(
        payloads()[0]
    )


def test_shutdown_stops_the_scanner_process() -> None:
    proc = ready_pool()._proc
    assert proc is not None
    pool.shutdown()
    assert proc.poll() is not None


class _Signalling:
    """A process's stdin that sends the process ``signum`` right after it took a text
    (SIGKILL: killed while scanning; SIGSTOP: it will answer only once continued)."""

    def __init__(self, proc: subprocess.Popen[bytes], signum: int) -> None:
        self._proc = proc
        self._signum = signum
        assert proc.stdin is not None
        self._stdin = proc.stdin
        # Blocking again, so one write hands the whole text over before the signal.
        os.set_blocking(self._stdin.fileno(), True)

    def write(self, data: bytes | memoryview) -> int:
        n = int(self._stdin.write(data) or 0)
        os.kill(self._proc.pid, self._signum)
        if self._signum == signal.SIGKILL:
            self._proc.wait()
        return n

    def close(self) -> None:
        self._stdin.close()

    def fileno(self) -> int:
        return self._stdin.fileno()


def test_a_scan_that_fails_in_the_host_leaves_no_answer_behind_for_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shared = ready_pool()
    text = payloads()[0]
    scanner = build_scanner(CONFIG)
    secrets_net = scanner.detectors[0]  # runs in the host, over the whole text

    def broken(text: str) -> list[tuple[int, int, str]]:
        raise RuntimeError("a detector failed")

    monkeypatch.setattr(secrets_net, "find", broken)
    with pytest.raises(RuntimeError, match="a detector failed"):
        scanner.spans_raw(text)
    monkeypatch.undo()
    assert shared.failures == 0  # not the process's fault
    assert shared.ready()
    before = shared.done
    assert build_scanner(CONFIG).spans_raw(text) == build_scanner(ALONE).spans_raw(text)
    assert shared.done == before + 1


FAULTY = """
import struct, sys
read, write = sys.stdin.buffer.read, sys.stdout.buffer.write
read(struct.unpack("<I", read(4))[0])
write(struct.pack("<I", 23) + b'{"entities": ["EMAIL"]}'); sys.stdout.flush()
while head := read(24):
    size, keep, chunk = struct.unpack("<QQQ", head)
    read(size)
    # one span before the part it was given: a position outside its text
    write(struct.pack("<QddQ", 1, 0.0, 0.0, size) + struct.pack("<qq", 0, 5) + bytes([0]))
    sys.stdout.flush()
"""


def test_a_malformed_answer_is_refused_and_that_part_scanned_in_the_host(
    caplog: pytest.LogCaptureFixture,
) -> None:
    shared = ready_pool()
    shared.close()
    shared.command = ["-c", FAULTY]
    assert shared.ready()
    text = payloads()[0]
    with caplog.at_level(logging.WARNING, logger="codemode.privacy.pool"):
        got = build_scanner(CONFIG).spans_raw(text)
    assert got == build_scanner(ALONE).spans_raw(text)
    assert "positions outside the text" in caplog.text
    assert shared.failures == 1


def test_the_scanner_process_imports_no_code_from_the_hosts_first_path_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m`` puts the directory it ran in first on the host's ``sys.path``; an
    upstream server may write there: a ``codemode`` package made there after the host
    started (the host imported its own before) must not run in the scanner process,
    outside every jail."""
    marker = tmp_path / "ran"
    planted = tmp_path / "cwd" / "codemode"
    (planted / "privacy").mkdir(parents=True)
    (planted / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (planted / "privacy" / "__init__.py").write_text("")
    (planted / "privacy" / "scanproc.py").write_text("")
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "cwd"), *sys.path])
    shared = pool.pool_for(CONFIG.entities, CONFIG.phone_regions)
    assert shared is not None
    started = shared.ready()
    assert not marker.exists()
    assert started
    text = payloads()[0]
    assert build_scanner(CONFIG).spans_raw(text) == build_scanner(ALONE).spans_raw(text)
    assert shared.done == 1 and shared.failures == 0


class _Interrupted(BaseException):
    """What a signal's handler raises (as Ctrl-C raises KeyboardInterrupt)."""


def test_a_scan_interrupted_while_awaiting_the_answer_leaves_none_for_the_next_text() -> None:
    """Ctrl-C (or any signal handler's exception) while the host waited for the process's
    answer left that answer in the pipe: the next large text was given it, positions of
    another text, and every later text the answer of the one before."""
    shared = ready_pool()
    proc = shared._proc
    assert proc is not None
    first, second = payloads()[0], payloads()[2]
    waiting = pool.ScanPool._read.__code__

    def interrupt(signum: int, frame: object) -> None:
        f = frame
        while f is not None and f.f_code is not waiting:  # type: ignore[attr-defined]
            f = f.f_back  # type: ignore[attr-defined]
        if f is None:  # not waiting for the answer yet: later
            signal.setitimer(signal.ITIMER_REAL, 0.05)
            return
        raise _Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    proc.stdin = _Signalling(proc, signal.SIGSTOP)  # type: ignore[assignment]
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(_Interrupted):
            build_scanner(CONFIG).spans_raw(first)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)  # it answers the first text now
    assert shared.failures == 0  # not the process's fault
    for text in (second, second):
        shared.ready()
        assert build_scanner(CONFIG).spans_raw(text) == build_scanner(ALONE).spans_raw(text)


def test_a_stopped_scanner_process_cannot_hang_the_hosts_scan(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process stopped before it read a text (SIGSTOP, a frozen cgroup) fills the pipe:
    the host's write gives up after its deadline and the host scans the text alone."""
    monkeypatch.setattr(pool, "WRITE_SECONDS", 0.5)
    shared = ready_pool()
    proc = shared._proc
    assert proc is not None
    text = payloads()[0]
    assert len(text) > 4 * 65_536  # more than a pipe holds
    want = build_scanner(ALONE).spans_raw(text)
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        with caplog.at_level(logging.WARNING, logger="codemode.privacy.pool"):
            assert build_scanner(CONFIG).spans_raw(text) == want
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
    assert shared.failures == 1
    assert "took no input" in caplog.text
    assert proc.poll() is not None or proc.wait(5) is not None  # that process was ended


def test_the_hosts_part_comes_first_then_the_processs_part_by_part() -> None:
    shared = ready_pool()
    text = payloads()[0]
    parts = list(build_scanner(CONFIG).spans_parts(text))
    # the host's part, then the process's in about pool.PARTS parts (one answer each)
    assert len(parts) >= pool.PARTS and all(parts)
    for before, after in pairwise(parts):
        assert max(e for _, e, _ in before) <= min(s for s, _, _ in after)
    assert [s for part in parts for s in part] == build_scanner(ALONE).spans_raw(text)
    assert shared.done == 1


def test_a_caller_that_stops_after_the_hosts_part_leaves_no_answer_behind() -> None:
    shared = ready_pool()
    text, other = payloads()[0], payloads()[2]
    parts = build_scanner(CONFIG).spans_parts(text)
    next(parts)
    parts.close()  # (the caller failed while the process was scanning)
    assert shared.failures == 0  # not the process's fault
    assert shared.ready()
    assert build_scanner(CONFIG).spans_raw(other) == build_scanner(ALONE).spans_raw(other)
    assert shared.done == 1


def test_protect_in_parts_gives_repeated_notes_the_same_tokens_as_alone() -> None:
    rows = random_rows(13, 5000)
    notes = [
        f"Call ann{i}@example.com or +1 415 555 01{i:02d} about the order, said Bo."
        for i in range(7)
    ]
    for i, row in enumerate(rows):
        row["notes"] = notes[i % 7]
    key = os.urandom(32)
    shared = ready_pool()
    got, report = Privacy(CONFIG, Vault(key)).protect(rows)
    want, want_report = Privacy(ALONE, Vault(key)).protect(rows)
    assert shared.done == 1
    assert got == want
    assert report.found == want_report.found


def test_a_scanner_process_killed_between_its_parts_loses_nothing() -> None:
    shared = ready_pool()
    text = payloads()[0]
    got: list[tuple[int, int, str]] = []
    for i, part in enumerate(build_scanner(CONFIG).spans_parts(text)):
        got.extend(part)
        if i == 1 and shared._proc is not None:  # the process's first part is in
            shared._proc.kill()
    assert got == build_scanner(ALONE).spans_raw(text)
    assert build_scanner(CONFIG).spans_raw(text) == build_scanner(ALONE).spans_raw(text)
