"""The audit log: append-only JSONL, each line chained to the one before by an HMAC.

A line is a JSON object with sorted keys, written as one ``write`` on a file opened with
``O_APPEND``::

    {"kind":"tool",...,"prev":"<mac of the line before>","seq":41,"time":"..."} + mac

The ``mac`` field is appended last: it is the HMAC-SHA256 (chain key) of the line's bytes
without it, so a verifier recomputes it from the raw line, with no re-serialisation.
``prev`` is ``""`` for the first line ever written. ``seq`` counts lines from 1.

After each write, the head (``seq``, ``mac``, file) is written over the head file, outside
the workspace: the chain alone cannot show that its last lines were cut off, the head can.
Every process appending to one log takes a lock file and reads the head first, so several
processes (``codemode serve``, the CLI) extend one chain. Tool-call lines inside a run may
be deferred and written as one batch (``AuditLog.append``): a crash of the host process
loses the lines still pending, never a line already written, and what was written still
verifies. Past ``max_bytes`` the active
file is renamed ``<stem>.<last seq>.jsonl`` and a new one starts; the chain continues
across files (and ``keep`` bounds how many rotated files remain).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
import fcntl
import hashlib
import hmac
import json
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .keys import Keys

log = logging.getLogger(__name__)

HEAD_SIZE = 256
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
MAC_HEX = 64
_MAC_TAIL = re.compile(rb',"mac":"([0-9a-f]{64})"\}$')


# One encoder, built once: ``json.dumps`` with options builds a new one per call.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
).encode
_CANONICAL_ASCII = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=repr
).encode
_second: tuple[int, str] = (-1, "")


def now() -> str:
    """UTC with milliseconds (``2026-11-28T04:42:51.123Z``); the second's text is kept, as
    ``datetime.isoformat`` costs more than the rest of a line's bookkeeping."""
    global _second
    t = time.time()
    sec = int(t)
    cached = _second
    if cached[0] != sec:
        cached = _second = (sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)))
    return f"{cached[1]}.{int((t - sec) * 1000):03d}Z"


def canonical(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8: equal values give equal bytes (for HMACs).

    A string with a lone surrogate (a client's JSON can send ``"\\ud800"``, and the code
    it sends reaches the audit before the worker refuses it) has no UTF-8 form: such a
    value is written with JSON's ``\\u`` escapes instead, so its line is written and
    verifies, where the encoding error lost the record and failed the run."""
    text = _CANONICAL(value)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return _CANONICAL_ASCII(value).encode()


def sign(keys: Keys, body: bytes) -> str:
    return hmac.digest(keys.chain, body, hashlib.sha256).hex()


def split_line(raw: bytes) -> tuple[bytes, str] | None:
    """(the signed bytes, the mac) of one line without its newline; None if it has no mac."""
    m = _MAC_TAIL.search(raw)
    if m is None:
        return None
    return raw[: m.start()] + b"}", m.group(1).decode()


@dataclass(frozen=True, slots=True)
class Head:
    """The last line's ``seq`` and ``mac``, the active file's inode and size (so
    writers notice another process's appends and rotations without a ``stat``), and
    ``first``: the seq the kept chain starts at (1, or past the files ``keep`` removed),
    so lines cut off the start are detected as those cut off the end are. ``first`` is 0
    in a head written before it existed: unknown."""

    seq: int = 0
    mac: str = ""
    ino: int = 0
    size: int = 0
    first: int = 1

    def encode(self) -> bytes:
        text = f"{self.seq} {self.mac or '-'} {self.ino} {self.size} {self.first}"
        return text.encode().ljust(HEAD_SIZE - 1) + b"\n"

    @classmethod
    def decode(cls, data: bytes) -> Head | None:
        parts = data.split()
        if not parts:
            return cls()
        try:
            seq, mac, ino, size, *first = parts
            text = mac.decode()
            start = int(first[0]) if len(first) == 1 else 0
            if len(first) > 1:
                return None
            return cls(int(seq), "" if text == "-" else text, int(ino), int(size), start)
        except ValueError:
            return None


def read_head(path: Path) -> Head | None:
    """The head in ``path``; an empty head when there is none; None when it is unreadable."""
    try:
        return Head.decode(path.read_bytes())
    except FileNotFoundError:
        return Head()


def log_files(path: Path) -> list[Path]:
    """The rotated files (oldest first), then the active one (if it exists)."""
    numbered = [(_rotated_seq(p, path), p) for p in path.parent.glob(f"{path.stem}.*{path.suffix}")]
    rotated = [p for seq, p in sorted(numbered) if seq >= 0]
    return [*rotated, *([path] if path.exists() else [])]


def _rotated_seq(p: Path, active: Path) -> int:
    """The last seq in a rotated file's name (``audit.000000001234.jsonl``), else -1."""
    start, end = len(active.stem) + 1, len(p.name) - len(active.suffix)
    middle = p.name[start:end] if end > start else ""
    return int(middle) if middle.isascii() and middle.isdigit() else -1  # not '²'


def iter_lines(path: Path) -> Iterator[tuple[Path, int, bytes, bool]]:
    """(file, line number, raw line without newline, whether it ended with one)."""
    for file in log_files(path):
        with file.open("rb") as f:
            for n, raw in enumerate(f, 1):
                ended = raw.endswith(b"\n")
                yield file, n, raw.rstrip(b"\n") if ended else raw, ended


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every readable record, oldest first (for tail and search; ``verify`` checks them)."""
    for _, _, raw, _ in iter_lines(path):
        try:
            doc = json.loads(raw)
        except ValueError:
            continue
        if isinstance(doc, dict):
            yield doc


class AuditLog:
    """One log file (and its head), appended to by this process.

    ``append(record)`` writes at once; ``append(record, defer=True)`` (tool calls inside a
    run) keeps the record in memory until ``flush``: the next undeferred append (the run's
    own line), ``batch_lines`` pending records, ``batch_seconds`` after the first one (a
    timer on the running event loop, and a check on every append), ``close`` or the exit
    of the process. A flush is one lock, one read of the head, one ``write`` of whole lines
    and one write of the head, so a batch costs about what one line did.
    """

    def __init__(
        self,
        path: Path,
        keys: Keys,
        *,
        head: Path,
        max_bytes: int,
        keep: int | None = None,
        sinks: tuple[str, ...] = (),
        batch_lines: int = 1,
        batch_seconds: float = 1.0,
    ) -> None:
        self.path = path
        self.keys = keys
        self.head_path = head
        self.max_bytes = max_bytes
        self.keep = keep
        self.batch_lines = max(batch_lines, 1)
        self.batch_seconds = batch_seconds
        self._sinks = _open_sinks(sinks)
        self._mutex = threading.Lock()
        self._pending: list[dict[str, Any]] = []
        self._first_at = 0.0
        self._timer: asyncio.AbstractEventLoop | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            head.parent.mkdir(parents=True, exist_ok=True)
            # Never through a link: one planted where the log, its lock or its head go (by
            # anything that could write there before) would make codemode, maybe root,
            # write its records into the link's target.
            self._lock_fd = os.open(
                path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o600
            )
            self._head_fd = os.open(head, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o600)
        except OSError as exc:
            raise ConfigError(
                f"audit: cannot open {path} or {head}: {exc.strerror or exc}"
            ) from None
        self._fd = -1
        self._ino = -1
        _OPEN.add(self)

    def append(self, record: dict[str, Any], *, defer: bool = False) -> None:
        """Add ``record`` (stamped now) as the next line of the chain; written at once
        unless ``defer`` (then by the next flush, see the class doc)."""
        entry = {**record, "time": now()}
        with self._mutex:
            pending = self._pending
            pending.append(entry)
            if defer and self.batch_lines > 1:
                if len(pending) == 1:
                    self._first_at = time.monotonic()
                    self._arm_timer()
                    return
                if (
                    len(pending) < self.batch_lines
                    and time.monotonic() - self._first_at < self.batch_seconds
                ):
                    return
            self._flush_locked()

    def flush(self) -> None:
        """Write the pending records, if any."""
        with self._mutex:
            self._flush_locked()

    def _arm_timer(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop: the age check on the next append, run end or exit flush
        if self._timer is loop:
            return  # already armed there (a loop that closed first leaves a stale one)
        self._timer = loop
        loop.call_later(self.batch_seconds, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        try:
            self.flush()
        except OSError as exc:
            log.error("audit: could not write %s: %s", self.path, exc)

    def _flush_locked(self) -> None:
        if not self._pending:
            return
        if self._lock_fd < 0:
            self._pending.clear()
            raise OSError(errno.EBADF, f"the audit log {self.path} is closed")
        pending, self._pending = self._pending, []
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            self._write(pending)
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _write(self, records: list[dict[str, Any]]) -> None:
        head = Head.decode(os.pread(self._head_fd, HEAD_SIZE, 0)) or Head()
        if head.ino != self._ino or self._fd < 0:
            self._open_active()
            head = Head(head.seq, head.mac, self._ino, os.fstat(self._fd).st_size, head.first)
        seq, mac, key = head.seq, head.mac, self.keys.chain
        lines: list[bytes] = []
        for record in records:
            seq += 1
            record["seq"] = seq
            record["prev"] = mac
            body = canonical(record)
            mac = hmac.digest(key, body, hashlib.sha256).hex()
            lines.append(body[:-1] + b',"mac":"' + mac.encode() + b'"}\n')
        data = lines[0] if len(lines) == 1 else b"".join(lines)
        _write_all(self._fd, data)
        size = head.size + len(data)
        os.pwrite(self._head_fd, Head(seq, mac, self._ino, size, head.first).encode(), 0)
        for sink in self._sinks:
            for line in lines:
                sink(line)
        if size >= self.max_bytes:
            self._rotate(seq, mac, head.first)

    def _open_active(self) -> None:
        """Open the active file (created if another process just rotated it away)."""
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, 0o600)
        self._ino = os.fstat(self._fd).st_ino

    def _rotate(self, last_seq: int, mac: str, first: int) -> None:
        rotated = self.path.with_name(f"{self.path.stem}.{last_seq:012d}{self.path.suffix}")
        os.replace(self.path, rotated)
        self._open_active()
        if self.keep is not None:
            files = log_files(self.path)[:-1]
            removed = files[: max(len(files) - self.keep, 0)]
            if removed:  # the kept chain now starts after the newest removed file
                first = max(first, _rotated_seq(removed[-1], self.path) + 1)
            # The head says so before any file goes: a crash between leaves files that
            # verify reports as removed by keep, never a head that hides a cut.
            os.pwrite(self._head_fd, Head(last_seq, mac, self._ino, 0, first).encode(), 0)
            for old in removed:
                with contextlib.suppress(OSError):
                    old.unlink()
            return
        os.pwrite(self._head_fd, Head(last_seq, mac, self._ino, 0, first).encode(), 0)

    def close(self) -> None:
        """Flush, then close the files (a failed flush is logged: close still closes)."""
        try:
            self.flush()
        except OSError as exc:
            log.error("audit: could not write %s: %s", self.path, exc)
        for fd in (self._fd, self._lock_fd, self._head_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fd = self._lock_fd = self._head_fd = -1
        _OPEN.discard(self)


def _write_all(fd: int, data: bytes) -> None:
    """One ``write`` of whole lines (``O_APPEND``: never interleaved with another
    writer's); the rare short write (a full disk, a signal) is completed."""
    done = os.write(fd, data)
    while done < len(data):
        done += os.write(fd, data[done:])


_OPEN: weakref.WeakSet[AuditLog] = weakref.WeakSet()


@atexit.register
def _flush_all() -> None:
    """Deferred lines still pending when the interpreter exits are written."""
    for each in list(_OPEN):
        try:
            each.flush()
        except OSError as exc:
            log.error("audit: could not write %s at exit: %s", each.path, exc)


def _open_sinks(names: tuple[str, ...]) -> list[Any]:
    sinks: list[Any] = []
    for name in names:
        if name == "stderr":
            sinks.append(_stderr)
        elif name == "syslog":
            import syslog

            syslog.openlog("codemode-audit", syslog.LOG_PID, syslog.LOG_AUTHPRIV)

            def to_syslog(line: bytes, _s: Any = syslog) -> None:
                _s.syslog(_s.LOG_INFO, line.decode(errors="replace").rstrip("\n"))

            sinks.append(to_syslog)
    return sinks


def _stderr(line: bytes) -> None:
    with contextlib.suppress(OSError):
        os.write(2, line)


__all__ = [
    "AuditLog",
    "Head",
    "canonical",
    "iter_lines",
    "iter_records",
    "log_files",
    "read_head",
    "sign",
    "split_line",
]
