"""A scanner process that runs the built-in detectors over part of a large text while
the host scans the rest: on a machine with two cores, a large result costs about half
the detectors' time.

Why this is safe (the trust reasoning):

- The scanner process is a child of the host, started from the host's own interpreter
  and package (``python -m codemode.privacy.scanproc``), as the same user, outside the
  sandbox. It is inside the host's trust boundary, like the host's own threads: the
  text it sees is text the host holds in memory anyway.
- It receives text only: no vault, no key, no token, no remembered credential (the
  credentials net and the held values stay in the host, so the environment's secrets
  never reach it). Of the decoding detector it runs only the search for spans that
  decode to text; the host decodes the spans it answers and scans them with every
  detector, its own net included. Text goes over an anonymous pipe, never to a
  file; the process keeps nothing once it has answered (no cache) and its stderr is
  discarded (a traceback would carry text).
- It answers with positions only (starts, ends, an entity index): the host decodes them
  as plain integers, never unpickles anything from it, and checks every position
  against the text; a malformed answer is treated as a crash.
- A crash, a hang or a malformed answer costs nothing but time: the host scans that part
  itself, logs a warning once, and starts a new process for a later result (after
  ``MAX_FAILURES`` failures, none: the host scans alone).

The result is the same as an in-process scan: the text is split right after a NUL (the
character that joins a value's strings, across which no detector matches when the
scanner is ``local_context``) or, for one long text, after a line break (when the
scanner is ``line_local``); each side also reads ``OVERLAP`` characters of the other
(the context a detector may look at) and keeps only what starts on its side.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Generator, Sequence
from itertools import repeat
from operator import add
from pathlib import Path
from typing import NamedTuple

from .encoded import KINDS
from .scan import POOL_MIN
from .scanproc import INIT, REPLY, REQUEST

__all__ = ["OVERLAP", "POOL_MIN", "Job", "PoolSpec", "ScanPool", "pool_for", "shutdown"]

log = logging.getLogger(__name__)

OVERLAP = 256
"""Characters of the other side each side reads (context words look 32 back)."""
MAX_FAILURES = 3
"""Failures of scanner processes after which the host scans alone."""
WRITE_SECONDS = 5.0
"""How long the process may take no input before it counts as failed (plus 4 µs a byte)."""
PARTS = 8
"""Parts a text of joined strings is answered in (``scanproc.cuts``): the host tokenizes
one part's values (and writes its new strings) while the process scans the next. What
the host does with the last part runs after the process is done: with 8 parts instead
of 4, that tail of a 10 MB customer table went from 58-73 ms to 43-52 ms, of a
10,000-row call from 13 to 8 ms (measured at a load of 5 to 9)."""
CHUNK_MIN = 16_384
"""Characters a part holds at least (results of 128K+ characters for the process are
answered in parts, as with 4 parts of 32K)."""
_HOST_SHARE = 0.4  # first guess of the host's share of the built-in detectors' text
ENABLED = True
"""Off: every scan runs in the host (the reference tests' plain code must run there)."""


def _import_path() -> str:
    """The host's ``sys.path`` for the scanner process, in its order, without the directory
    the host runs in nor its script's (``python -m`` and ``python app.py`` put it first):
    an upstream server may write there, and a ``codemode/`` or ``json.py`` made there after
    the host started (the host imported its own before) would run in the scanner process,
    outside every jail. The directory of the host's own ``codemode`` is always kept."""
    root = str(Path(__file__).resolve().parents[2])
    try:
        here = {os.path.realpath(os.getcwd())}
    except OSError:  # the working directory was removed
        here = set()
    if sys.argv and sys.argv[0] not in ("", "-c", "-m"):
        here.add(os.path.realpath(os.path.dirname(os.path.abspath(sys.argv[0]))))
    path = [p for p in sys.path if p and (p == root or os.path.realpath(p) not in here)]
    return os.pathsep.join(path if root in path else [root, *path])


class PoolSpec(NamedTuple):
    """What the scanner process builds its detectors from."""

    entities: tuple[str, ...]
    regions: tuple[str, ...]


class Job(NamedTuple):
    """A part of a text sent to the scanner process: it scans from ``split`` on."""

    pool: ScanPool
    split: int
    sent: float
    """Seconds the host spent sending."""
    decode: bool
    """Whether it also answers encoded spans (``scanproc``)."""


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class ScanPool:
    """One scanner process for one ``PoolSpec``, started lazily and reused; one text at
    a time (a second thread scanning meanwhile scans alone)."""

    def __init__(self, spec: PoolSpec) -> None:
        self.spec = spec
        self.failures = 0
        self.share = _HOST_SHARE
        self._proc: subprocess.Popen[bytes] | None = None
        self._entities: list[str] | None = None
        self._busy = threading.Lock()
        self.done = 0
        """Texts the process scanned part of."""
        self.cpu = 0.0
        """CPU seconds the process spent on them (the benchmark counts them)."""
        self.command = ["-P", "-m", "codemode.privacy.scanproc"]
        """What the interpreter runs (tests run a faulty scanner)."""

    # -- the process ---------------------------------------------------------------------
    def _ensure(self) -> bool:
        """Whether a process is ready; starts one (not waited for) when there is none."""
        proc = self._proc
        if proc is None:
            if self.failures >= MAX_FAILURES:
                return False
            self._start()
            return False
        if proc.poll() is not None:
            self._failed(f"it exited with code {proc.returncode}")
            return False
        if self._entities is None:
            assert proc.stdout is not None
            if not select.select([proc.stdout], [], [], 0)[0]:
                return False  # still starting: this text is scanned in the host
            hello = self._read(INIT.size, 5.0)
            body = None if hello is None else self._read(INIT.unpack(hello)[0], 5.0)
            try:
                names = None if body is None else json.loads(body)["entities"]
            except (ValueError, KeyError, TypeError):
                names = None
            if (
                not isinstance(names, list)
                or not all(isinstance(n, str) for n in names)
                or any(n[:1] == "~" and n[1:] not in KINDS for n in names)
            ):
                self._failed("it did not start")
                return False
            self._entities = names
        return True

    def ready(self, timeout: float = 10.0) -> bool:
        """Start the process if needed and wait until it is ready (tests, warm-ups)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._busy:
                if self._ensure():
                    return True
                proc = self._proc
            if proc is None:
                return False
            assert proc.stdout is not None
            select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        return False

    def _start(self) -> None:
        # The host's own import path (the same codemode) but its working directory and
        # script directory (``_import_path``), nothing of its environment (which may hold
        # credentials), and ``-P``: no working directory on the path.
        env = {"PATH": os.environ.get("PATH", os.defpath), "PYTHONPATH": _import_path()}
        try:
            self._proc = subprocess.Popen(
                [sys.executable, *self.command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                bufsize=0,
                env=env,
                close_fds=True,
                start_new_session=True,  # a terminal's Ctrl-C is the host's to handle
            )
            assert self._proc.stdin is not None
            os.set_blocking(self._proc.stdin.fileno(), False)  # _write waits with a deadline
            spec = json.dumps({"entities": self.spec.entities, "regions": self.spec.regions})
            self._write(INIT.pack(len(spec)) + spec.encode())
        except OSError as exc:
            self._failed(f"it could not be started ({exc})")

    def _failed(self, why: str) -> None:
        self.failures += 1
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()  # (hung, or mid-answer: nothing of it is wanted)
        self.close()
        more = (
            "a new one will be started for a later result"
            if self.failures < MAX_FAILURES
            else "large results are scanned in this process from now on"
        )
        log.warning(
            "privacy: the scanner process failed (%s); its part was scanned in this "
            "process instead, nothing was missed; %s",
            why,
            more,
        )

    def close(self) -> None:
        proc, self._proc, self._entities = self._proc, None, None
        if proc is None:
            return
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    # -- one text ------------------------------------------------------------------------
    def submit(self, text: str, sep: str, *, decode: bool = False) -> Job | None:
        """Send the end of ``text`` (from a ``sep`` near the pool's share) to the scanner
        process; None when it is busy, not ready, or ``text`` has no ``sep`` to split at.
        ``decode``: it also answers the spans that decode to text (``encoded.candidates``;
        split at a NUL only: base64 wrapped over lines crosses a line break)."""
        if not self._busy.acquire(blocking=False):
            return None
        try:
            if not self._ensure():
                self._busy.release()
                return None
            at = int(len(text) * self.share)
            split = text.find(sep, at, len(text) - OVERLAP) + 1
            if split == 0:
                split = text.rfind(sep, OVERLAP, at) + 1
            if split <= OVERLAP:
                self._busy.release()
                return None
            t0 = time.perf_counter()
            data = text[split - OVERLAP :].encode("utf-8", "surrogatepass")
            theirs = len(text) - split
            chunk = theirs // PARTS if sep == "\x00" and theirs >= PARTS * CHUNK_MIN else 0
            decode = decode and sep == "\x00"
            self._write(REQUEST.pack(len(data), OVERLAP, chunk, decode) + data)
            return Job(self, split, time.perf_counter() - t0, decode)
        except OSError as exc:
            self._failed(f"sending failed: {exc}")
            self._busy.release()
            return None
        except BaseException:
            # Interrupted (Ctrl-C in a notebook, a signal's handler) with a text or the
            # hello half sent or read: the conversation's state is unknown, so it ends.
            self._stop(release=True)
            raise

    def abandon(self, job: Job) -> None:
        """Give up on ``job`` (the host failed meanwhile): its answer must not be read as
        the next text's, so the process is stopped (a new one starts for a later text)."""
        try:
            self.close()
        finally:
            self._busy.release()

    def results(
        self, job: Job, length: int, host_other: float, host_own: float
    ) -> Generator[
        tuple[list[tuple[int, int, str]] | None, list[tuple[int, int, str]], int], None, None
    ]:
        """(candidates, encoded spans, up to) for each part the process answers of
        ``job``'s text (of ``length`` characters; positions in it): the candidates it
        found from the previous part's end (``job.split`` first) up to that character,
        and the spans there that decode to text (start, end, ``encoded.KINDS``' kind).
        (None, [], where it stopped) if it failed (the caller scans the rest from
        there). ``host_other``
        and ``host_own``: the host's seconds on its own detectors over the whole text
        and on its part (the shared detectors, and what it did with what they found),
        to balance the next split; the time the caller spends on each part (between
        two steps of this generator) counts too."""
        done = False
        upto = job.split
        spent_all = decoded_all = after = 0.0
        parts = 0
        try:
            tail = length - job.split
            off = job.split - OVERLAP
            names = self._entities
            assert names is not None
            first_encoded = next((i for i, x in enumerate(names) if x[:1] == "~"), len(names))
            while upto < length:
                got = self._reply(10.0 + tail / 250_000)
                if got is None:
                    done = True
                    yield None, [], upto
                    return
                t0 = time.perf_counter()
                spent, cpu, starts, ends, kinds, end = got
                end += off
                if (
                    end <= upto
                    or end > length
                    or (starts and (min(starts) + off < upto or max(starts) + off >= end))
                    or (ends and max(ends) > tail + OVERLAP)
                ):
                    self._failed("it answered positions outside the text")
                    done = True
                    yield None, [], upto
                    return
                if any(map(int.__gt__, starts, ends)):
                    self._failed("it answered a span that ends before it starts")
                    done = True
                    yield None, [], upto
                    return
                if kinds and max(kinds) >= len(names):
                    self._failed("it answered an unknown entity type")
                    done = True
                    yield None, [], upto
                    return
                found = list(
                    zip(
                        map(add, starts, repeat(off)),
                        map(add, ends, repeat(off)),
                        map(names.__getitem__, kinds),
                        strict=True,
                    )
                )
                encoded: list[tuple[int, int, str]] = []
                if kinds and max(kinds) >= first_encoded:  # (rare: one C pass to tell)
                    encoded = [(a, b, x[1:]) for a, b, x in found if x[0] == "~"]
                    found = [f for f in found if f[2][0] != "~"]
                upto = end
                parts += 1
                spent_all += spent
                self.cpu += cpu
                decoded_all += time.perf_counter() - t0
                if upto >= length:
                    done = True
                t1 = time.perf_counter()
                yield found, encoded, upto
                if upto < length:
                    after += time.perf_counter() - t1
            self.done += 1
            self._balance(job, length, host_other, host_own, spent_all, decoded_all, after, parts)
        except BaseException:
            # Interrupted while an answer was awaited or half read (Ctrl-C in a notebook,
            # a signal's handler), or the caller failed between two parts: left in the
            # pipe, an answer would be read as the next text's (positions of another
            # text: values missed). The process is stopped; a new one starts later.
            if not done:
                self._stop(release=False)
            raise
        finally:
            self._busy.release()

    def _stop(self, *, release: bool) -> None:
        """Stop the process without counting a failure of it (the host was interrupted);
        ``release``: also release ``_busy``, held by this thread."""
        try:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.kill()
            self.close()
        finally:
            if release:
                self._busy.release()

    def _balance(
        self,
        job: Job,
        length: int,
        host_other: float,
        host_own: float,
        spent: float,
        decoded: float,
        after: float,
        parts: int,
    ) -> None:
        """Move the split so the host is done with all but the process's last part when
        the process answers it: the host's share ``f`` of the text solves
        ``sent + other + decoded + r_h f L + r_p c (1 - f) L = r_w (1 - f) L``, with
        ``r_p`` the host's seconds a character on the process's parts and ``c`` the
        share of them the host works on before the last (0 with one part)."""
        ours, theirs = job.split, length - job.split
        if ours <= 0 or theirs <= 0 or spent <= 0 or host_own <= 0:
            return
        r_h, r_w = host_own / ours, spent / theirs
        c = 1 - 1 / parts if parts > 1 else 0.0
        r_p = after / (theirs * c) if c else 0.0
        fixed = job.sent + host_other + decoded
        best = (r_w * length - fixed - r_p * c * length) / ((r_h - r_p * c + r_w) * length)
        self.share = min(0.9, max(0.05, 0.5 * self.share + 0.5 * best))

    def _reply(
        self, timeout: float
    ) -> tuple[float, float, array[int], array[int], bytes, int] | None:
        head = self._read(REPLY.size, timeout)
        if head is None:
            self._failed("it stopped answering")
            return None
        n, spent, cpu, upto = REPLY.unpack(head)
        body = self._read(17 * n, timeout)
        if body is None:
            self._failed("its answer was cut short")
            return None
        starts, ends = array("q"), array("q")
        starts.frombytes(body[: 8 * n])
        ends.frombytes(body[8 * n : 16 * n])
        return spent, cpu, starts, ends, body[16 * n :], upto

    # -- the pipes -----------------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        """All of ``data`` to the process, or OSError once it takes nothing for a while:
        a process stopped (SIGSTOP, a frozen cgroup) must not hang the host's scan."""
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise OSError("no scanner process")
        view = memoryview(data)
        deadline = time.monotonic() + WRITE_SECONDS + len(data) / 250_000
        while view:
            n = proc.stdin.write(view)  # non-blocking: None when the pipe is full
            if n is not None:
                view = view[n:]
                continue
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [proc.stdin], [], left)[1]:
                raise OSError(f"it took no input for {WRITE_SECONDS:g} s")

    def _read(self, n: int, timeout: float) -> bytes | None:
        """``n`` bytes from the process, or None at its end or after ``timeout``."""
        proc = self._proc
        if proc is None or proc.stdout is None:
            return None
        fd = proc.stdout.fileno()
        parts: list[bytes] = []
        deadline = time.monotonic() + timeout
        while n > 0:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, min(n, 1 << 20))
            if not chunk:
                return None
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)


_pools: dict[PoolSpec, ScanPool] = {}
_pools_lock = threading.Lock()


def pool_for(entities: Sequence[str], regions: Sequence[str]) -> ScanPool | None:
    """The shared pool for these detectors, or None on a machine with one core."""
    if not ENABLED or _cores() < 2 or not sys.executable:
        return None
    spec = PoolSpec(tuple(sorted(set(entities))), tuple(regions))
    with _pools_lock:
        pool = _pools.get(spec)
        if pool is None:
            pool = _pools[spec] = ScanPool(spec)
        return pool


def shutdown() -> None:
    """Stop every scanner process (at exit; tests)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()


def _forget_in_child() -> None:
    """A forked child does not share its parent's scanner processes (their pipes would
    carry two conversations at once): it starts its own when it needs one."""
    global _pools_lock
    _pools.clear()
    _pools_lock = threading.Lock()


atexit.register(shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
