"""The worker's frames as the host reads them: untrusted bytes, checked before they cost.

The worker runs the agent's code, which can write anything to the protocol pipe. So:

- **op first, cap per op**: every frame starts with its op (``{"op":"call",...``, see
  ``codemode_worker.protocol``), so the host knows what a frame claims to be from its first
  bytes and refuses it before buffering the rest when it is over that op's cap: ``ready``
  is tiny, ``done`` carries what a run's result can honestly weigh, ``call`` carries data.
- **data is sliced, not parsed**: large bytes and strings travel as attachments after the
  JSON (``codemode_worker.protocol``); a call's JSON part may weigh ``call_json`` at most,
  and one that does not end by then is refused without buffering the rest.
- **large frames off the loop, within a budget**: a frame over ``inline`` bytes is parsed
  on a thread, after a count of its JSON values (a 57 MB frame of ``[],`` is 19 million
  lists: 1.5 GB of objects and seconds of parsing) against ``values``; the bytes all large
  frames of the process hold at once are bounded by :data:`BUDGET`.
- **every shape checked**: a parsed frame must match its schema (pydantic, strict): ids
  are ints in range (never bools, floats, Infinity or 30-digit numbers), a result's and an
  error's fields have their types, nothing else is allowed.

Any violation raises :class:`FrameError`; the host then stops that worker alone. The
worker refuses to send what the host would refuse (``codemode_worker.bridge``), so honest
code gets a clear error instead.
"""

from __future__ import annotations

import gc
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codemode_worker import protocol

if TYPE_CHECKING:
    from .frame_schema import Frame


class FrameError(ValueError):
    """A frame from the worker breaks the protocol; the host stops that worker."""


@dataclass(frozen=True, slots=True)
class FrameLimits:
    """What one frame from a worker may weigh, by op (bytes), and how many JSON values."""

    call: int = 256 << 20
    """A call's whole frame: its JSON and its attachments (raw bytes and strings)."""
    call_json: int = protocol.MAX_JSON
    """The JSON part of a call (what is parsed; large data travels as attachments)."""
    done: int = 12 << 20
    ready: int = 1024
    values: int = protocol.MAX_VALUES
    inline: int = 256 << 10
    """Frames up to this size are parsed on the event loop (fast); larger ones on a thread."""

    @classmethod
    def for_output(cls, max_output: int, call: int) -> FrameLimits:
        """Caps for a worker whose runs keep ``max_output`` characters of each stream.

        An honest "done" frame holds both streams, the value (the runtime's budget is
        ~1 MB of JSON) and the error; mostly one byte per character, and the worker trims
        the rare result that would escape to more (``codemode_worker.main._fit``).
        """
        return cls(call=call, done=max(2 << 20, 8 * max_output + (4 << 20)))

    def cap(self, op: str) -> int:
        return int(getattr(self, op))

    def for_worker(self) -> dict[str, int]:
        """The part the worker checks before it sends (``PipeLink`` arguments)."""
        return {
            "call": self.call,
            "json": self.call_json,
            "done": self.done,
            "values": self.values,
        }


# -- shapes: pydantic, loaded with the first worker (see .frame_schema) -----------------


def validate(msg: Any) -> Frame:
    """``msg`` as a typed frame, or :class:`FrameError` saying what is wrong (never the data)."""
    from .frame_schema import validate as check

    return check(msg)


def load_schema() -> None:
    """Import the frame schema (pydantic: blocking, ~0.1 s): run it off the event loop."""
    from . import frame_schema  # noqa: F401


def schema_loaded() -> bool:
    return "codemode.execution.frame_schema" in sys.modules


def parse(body: bytes | bytearray, op: str, limits: FrameLimits) -> Frame:
    """Parse and check one small frame body (on the loop)."""
    text, atts = _split(body, op, limits)
    return validate(_loads(text, atts))


def parse_large(frame: LargeFrame, limits: FrameLimits) -> Frame:
    """Parse and check a large frame: on a thread, after counting its JSON values.

    Attachments are sliced, not parsed; the frame's buffer is released at the end.
    """
    try:
        text, atts = _split(frame.body, frame.op, limits)
        if len(text) > limits.inline:
            if not isinstance(text, bytes | bytearray):
                text = bytes(text)  # the JSON part of a frame with attachments
            values = protocol.count_values(text, limits.values)
            if values > limits.values:
                raise FrameError(
                    f"a frame of {len(text):,} bytes of JSON holds more than "
                    f"{limits.values:,} JSON values"
                )
        with _gc_paused():
            return validate(_loads(text, atts))
    finally:
        frame.body = bytearray()
        frame.release()


def _split(
    body: bytes | bytearray, op: str, limits: FrameLimits
) -> tuple[bytes | bytearray | memoryview, memoryview | None]:
    text, atts = protocol.split_body(body)
    if atts is not None and op != "call":
        raise FrameError(f'a "{op}" frame with attachments')
    if op == "call" and len(text) > limits.call_json:
        raise FrameError(f"a call's JSON of {len(text):,} bytes is over {limits.call_json:,}")
    return text, atts


def _loads(text: bytes | bytearray | memoryview, atts: memoryview | None) -> Any:
    try:
        return protocol.loads(text, atts)
    except (ValueError, RecursionError) as exc:  # untrusted bytes: say so, never crash
        what = "a malformed attachment reference" if "attachment" in str(exc) else "invalid JSON"
        raise FrameError(f"a frame holds {what} ({type(exc).__name__})") from None
    except (KeyError, TypeError) as exc:  # a forged bytes/blob marker
        raise FrameError(f"a frame holds a malformed binary value ({exc!r})"[:300]) from None


_gc_lock = threading.Lock()
_gc_holds = 0
_gc_was_enabled = False


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Parsed JSON has no reference cycles: the collector would only rescan it, over and
    over while a large frame is built (2-3x the parse time), with the GIL held."""
    global _gc_holds, _gc_was_enabled
    with _gc_lock:
        if _gc_holds == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holds += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holds -= 1
            if _gc_holds == 0 and _gc_was_enabled:
                gc.enable()


_parsers: ThreadPoolExecutor | None = None


def parser_pool() -> ThreadPoolExecutor:
    """Where large frames are parsed: two threads for the process (a bound on the memory
    that frames being parsed at once can hold, whatever the number of workers)."""
    global _parsers
    if _parsers is None:
        _parsers = ThreadPoolExecutor(2, thread_name_prefix="codemode-frames")
    return _parsers


# -- reading --------------------------------------------------------------------------------

_OP_RE = re.compile(rb'\{"op":"(ready|call|done)",')
_PREFIX = len(b'{"op":"ready",')


class FrameBudget:
    """Bytes that large frames may hold at once in the whole process, being read or parsed.

    Per-worker caps do not bound the host when many workers send large frames together:
    a reader that cannot reserve its frame's size waits (its worker blocks on a full
    pipe) until another frame is done. One frame is always admitted when none is held.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._lock = threading.Lock()
        self._waiters: list[Callable[[], None]] = []

    def take(self, size: int, wake: Callable[[], None]) -> bool:
        """Reserve ``size`` bytes, or register ``wake`` (called, from any thread, when
        bytes are given back) and return False."""
        with self._lock:
            if self.used == 0 or self.used + size <= self.capacity:
                self.used += size
                return True
            self._waiters.append(wake)
            return False

    def give(self, size: int) -> None:
        with self._lock:
            self.used -= size
            waiters, self._waiters = self._waiters, []
        for wake in waiters:
            wake()


def _budget_mb() -> int:
    env = os.environ.get("CODEMODE_FRAME_BUDGET_MB", "")
    return int(env) if env.isdigit() and int(env) > 0 else 1024


BUDGET = FrameBudget(_budget_mb() << 20)
"""The process's budget for large frames (``CODEMODE_FRAME_BUDGET_MB``, default 1 GB)."""


@dataclass(slots=True)
class LargeFrame:
    """A complete frame too large to parse on the loop: parse it with :func:`parse_large`.

    It holds ``held`` bytes of the process's budget until parsed (or dropped).
    """

    op: str
    body: bytearray
    held: int = 0
    budget: FrameBudget | None = None

    def release(self) -> None:
        held, self.held = self.held, 0
        if held and self.budget is not None:
            self.budget.give(held)


class FrameReader:
    """Reads frames from the worker's protocol pipe under :class:`FrameLimits`.

    Small frames come back parsed and checked; a large one comes back as a
    :class:`LargeFrame`, and reading stops after it so the caller keeps the order (call
    :meth:`buffered` for frames that arrived behind it).
    """

    def __init__(
        self,
        fd: int,
        limits: FrameLimits,
        wake: Callable[[], None] = lambda: None,
        budget: FrameBudget = BUDGET,
    ) -> None:
        self.fd = fd
        self.limits = limits
        self.budget = budget
        self.held = 0  # bytes of the budget this reader holds (one large frame at most)
        self.waiting = False  # a large frame waits for the budget: do not read meanwhile
        self._wake = wake
        self._buf = bytearray()
        self._big: bytearray | None = None
        self._big_op = ""
        self._size = 0  # of the large frame being read
        self._filled = 0
        self._scanned = 0  # how far the JSON part's end was looked for (-1: found)

    def _check_json_part(self) -> None:
        """A call's JSON part must end (a newline) within ``call_json`` bytes: refuse one
        that does not as soon as that many have come, without buffering the rest."""
        big = self._big
        if big is None or self._big_op != "call" or self._scanned < 0:
            return
        end = min(self._filled, self.limits.call_json + 1)
        if big.find(b"\n", self._scanned, end) >= 0 or end == self._size:
            self._scanned = -1  # found (or the frame is complete: parsing checks it)
        elif end > self.limits.call_json:
            raise FrameError(f"a call's JSON is over {self.limits.call_json:,} bytes")
        else:
            self._scanned = end

    @property
    def mid_frame(self) -> bool:
        """A large frame is being read and is not complete yet."""
        return self._big is not None

    @property
    def progress(self) -> int:
        """Bytes of the large frame read so far (to see whether it still comes)."""
        return self._filled

    def release(self) -> None:
        """Give back the budget of a large frame still being read (its worker is gone)."""
        held, self.held = self.held, 0
        if held:
            self.budget.give(held)

    def _complete(self, op: str, body: bytearray) -> LargeFrame:
        frame = LargeFrame(op, body, self.held, self.budget)
        self.held = 0  # the frame holds the budget now, until it is parsed
        return frame

    def read(self) -> list[Frame | LargeFrame] | None:
        """What one read of the pipe completes; None at end of file."""
        if self._big is not None:
            # grown as the bytes come: a frame's claimed size costs nothing until sent
            data = os.read(self.fd, min(1 << 20, self._size - self._filled))
            if not data:
                return None
            self._big += data
            self._filled += len(data)
            self._check_json_part()
            if self._filled < self._size:
                return []
            big, self._big = self._big, None
            return [self._complete(self._big_op, big)]
        data = os.read(self.fd, 1 << 18)
        if not data:
            return None
        self._buf += data
        return self.buffered()

    def buffered(self) -> list[Frame | LargeFrame]:
        """Complete frames already read, up to and including the first large one."""
        buf = self._buf
        out: list[Frame | LargeFrame] = []
        while len(buf) >= 4:
            (size,) = protocol.HEADER.unpack_from(buf)
            if size > self.limits.call:
                raise FrameError(f"a frame claims {size:,} bytes, over every limit")
            if len(buf) - 4 < min(size, _PREFIX):
                break  # its op is not known yet
            op = self._op(buf[4 : 4 + min(size, _PREFIX)], size)
            cap = self.limits.cap(op)
            if size > cap:
                raise FrameError(f'a "{op}" frame of {size:,} bytes is over its cap of {cap:,}')
            if size > self.limits.inline:
                if not self.held and not self.budget.take(size, self._wake):
                    self.waiting = True
                    break
                self.waiting, self.held = False, size
                have = len(buf) - 4
                big = bytearray(buf[4 : 4 + size])
                del buf[: 4 + size]
                if have >= size:
                    out.append(self._complete(op, big))
                else:
                    self._big, self._big_op, self._size, self._filled = big, op, size, have
                    self._scanned = 0
                    self._check_json_part()
                break
            if len(buf) < 4 + size:
                break
            body = bytes(buf[4 : 4 + size])
            del buf[: 4 + size]
            out.append(parse(body, op, self.limits))
        return out

    @staticmethod
    def _op(head: bytes | bytearray, size: int) -> str:
        m = _OP_RE.match(head)
        if m is None or size < m.end() + 2:
            raise FrameError("a frame does not start with a known op")
        return m.group(1).decode()


__all__ = [
    "BUDGET",
    "FrameBudget",
    "FrameError",
    "FrameLimits",
    "FrameReader",
    "LargeFrame",
    "load_schema",
    "parse",
    "parse_large",
    "parser_pool",
    "schema_loaded",
    "validate",
]
