"""The execution engine: runs one cell of agent code in a persistent namespace.

It knows nothing of pipes or processes: ``main.py`` drives it in a subprocess worker and
the in-process executor drives it from a thread. A cell behaves as in a REPL: the value of
a final expression is returned (a trailing ``;`` suppresses it), top-level ``await`` works,
and output is captured per run, never leaking into a later run.
"""

from __future__ import annotations

import ast
import contextvars
import io
import linecache
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from types import CodeType, TracebackType
from typing import Any

from . import bridge
from .bounds import keep_ends, keep_head
from .live import LiveOutput

_CO_COROUTINE = 0x0080
_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_MAX_REPR = 20_000
_MAX_VALUE_JSON = 1_000_000
_NO_VALUE = object()


class Capture:
    """Output of one run for one stream: head kept up to ``limit``, the rest counted.

    What is kept is also handed to ``live`` (sent to the host as it is printed)."""

    __slots__ = ("_chunks", "_index", "_live", "_size", "dropped", "limit", "state")

    def __init__(self, limit: int, live: LiveOutput | None = None, index: int = 0) -> None:
        self._chunks: list[str] = []
        self._size = 0
        self.limit = limit
        self.dropped = 0
        self.state = "open"  # open | done | stopped
        self._live = live
        self._index = index

    def write(self, s: str) -> None:
        room = self.limit - self._size
        if room >= len(s):
            self._chunks.append(s)
            self._size += len(s)
            kept = s
        else:
            kept = s[:room] if room > 0 else ""
            if room > 0:
                self._chunks.append(kept)
                self._size += room
            self.dropped += len(s) - max(room, 0)
        if self._live is not None and kept:
            self._live.write(self._index, kept)

    def text(self) -> str:
        out = "".join(self._chunks)
        if self.dropped:
            out = keep_head(out, self._size, total=self._size + self.dropped)
        return out


_current: contextvars.ContextVar[tuple[Capture, Capture] | None] = contextvars.ContextVar(
    "codemode_capture", default=None
)


class _BinaryView:
    """``sys.stdout.buffer``: bytes are decoded as UTF-8, invalid bytes replaced."""

    def __init__(self, stream: Router) -> None:
        self._stream = stream

    def write(self, b: bytes | bytearray | memoryview) -> int:
        self._stream.write(bytes(b).decode("utf-8", errors="replace"))
        return len(b)

    def flush(self) -> None:
        pass


class Router(io.TextIOBase):
    """Stands in for sys.stdout/sys.stderr and sends each write to its run's capture.

    The owner is the capture in the writer's context (threads and tasks inherit it); a
    run that finished normally forwards late output to the active run, a stopped run's
    output is dropped. With no run at all, writes go to ``fallback``.
    """

    def __init__(
        self, index: int, fallback: Any, active: Callable[[], tuple[Capture, Capture] | None]
    ):
        super().__init__()
        self._index = index
        self._fallback = fallback
        self._active = active
        self.buffer = _BinaryView(self)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    @property
    def errors(self) -> str:  # type: ignore[override]
        return "replace"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        pair = _current.get()
        if pair is None or pair[0].state == "done":
            pair = self._active()
        if pair is None:
            if self._fallback is not None:
                self._fallback.write(s)
            return len(s)
        cap = pair[self._index]
        if cap.state != "stopped":
            cap.write(s)
        return len(s)

    def flush(self) -> None:
        if self._fallback is not None and _current.get() is None:
            self._fallback.flush()


def _cpu_seconds() -> float:
    try:
        import resource
    except ImportError:  # not a Unix
        return 0.0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _usage(cpu_before: float) -> dict[str, float]:
    """CPU seconds of the run (all threads of the worker) and the worker's peak RSS."""
    try:
        import resource
    except ImportError:
        return {}
    ru = resource.getrusage(resource.RUSAGE_SELF)
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return {"cpu_s": ru.ru_utime + ru.ru_stime - cpu_before, "peak_rss_bytes": ru.ru_maxrss * scale}


def _json_safe(value: Any, budget: list[int], depth: int = 0) -> Any:
    """Return a JSON-native copy of ``value`` or raise ValueError.

    ``budget`` approximates the JSON size in characters (strings by length, other items
    a few characters each), so a huge value falls back to its repr without being encoded.
    """
    kind = type(value)
    if kind is int and value.bit_length() > 13_000:  # ~4,000 digits: past str(int)'s limit
        raise ValueError("too large")
    budget[0] -= (
        len(value) + 2 if kind is str else value.bit_length() // 3 + 2 if kind is int else 4
    )
    if budget[0] < 0 or depth > 100:
        raise ValueError("too large")
    if value is None or isinstance(value, bool | int | float | str):
        if type(value) not in (type(None), bool, int, float, str):
            raise ValueError("subclass")
        return value
    if type(value) in (list, tuple):
        return [_json_safe(v, budget, depth + 1) for v in value]
    if type(value) is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise ValueError("non-string key")
            budget[0] -= len(k) + 3
            out[k] = _json_safe(v, budget, depth + 1)
        return out
    raise ValueError("not JSON")


def _safe_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001 - a broken __repr__ must not break the run
        text = f"<{type(value).__name__} object; repr() failed: {exc!r}>"
    return text


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    mod = cls.__module__
    if mod in ("builtins", "__main__", "codemode_worker.errors"):
        return cls.__qualname__
    return f"{mod}.{cls.__qualname__}"


def _is_internal(filename: str) -> bool:
    return filename.startswith(_PKG_DIR)


def _trim(te: traceback.TracebackException) -> None:
    """Drop codemode's own frames so the traceback shows the user's code."""
    seen: set[int] = set()
    stack: list[traceback.TracebackException | None] = [te]
    while stack:
        cur = stack.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        cur.stack = traceback.StackSummary.from_list(
            [f for f in cur.stack if not _is_internal(f.filename)]
        )
        stack.extend([cur.__cause__, cur.__context__])


WARM_UP_CELLS = ("n = 1\nn", "n += 1\nn", "m = {'k': [n, str(n)]}\nm")
"""What :meth:`Runtime.warm_up` runs: assignments and a value of each kind a result
carries back; no output, no await (an event loop would stay behind)."""


class Runtime:
    """A persistent namespace plus the rules for running cells in it."""

    def __init__(
        self,
        max_output: int = 1_000_000,
        install_namespaces: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.max_output = max_output
        self._install = install_namespaces
        self._cell = 0
        self._loop: Any = None
        self._active: tuple[Capture, Capture] | None = None
        self._live = LiveOutput()
        self.globals: dict[str, Any] = {}
        self.reset()

    def active(self) -> tuple[Capture, Capture] | None:
        return self._active

    # -- namespace ---------------------------------------------------------------
    def reset(self) -> None:
        """Clear user state; imported modules stay cached, so this is fast."""
        if self._loop is not None:
            import asyncio

            for task in asyncio.all_tasks(self._loop):
                task.cancel()
        g: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
        if self._install is not None:
            self._install(g)
        self.globals = g

    def close(self) -> None:
        """Cancel leftover tasks and close the event loop of top-level ``await``."""
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            import asyncio

            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.close()

    def warm_up(self) -> None:
        """Run throwaway cells through every step of :meth:`run`, then forget them.

        A fresh process's first cells cost several times a later one's (the parser and
        compiler, the capture and live-output paths, the result's building have not run
        yet in it: ~1 ms of a warm pool worker's first run against ~0.3 ms, measured in
        the sandbox). Done before the worker says it is ready, so a pre-started worker
        pays it in the background, not in its session's first call. Nothing of it stays:
        no output (nothing reaches the host), the cell numbers start again at 1, and the
        namespace is fresh."""
        for code in WARM_UP_CELLS:
            self.run(code)
        for n in range(1, self._cell + 1):
            linecache.cache.pop(f"<cell {n}>", None)
        self._cell = 0
        self.reset()

    # -- running -------------------------------------------------------------------
    def run(self, code: str) -> dict[str, Any]:
        self._cell += 1
        filename = f"<cell {self._cell}>"
        adopt = bridge.share_link()
        live = self._live if adopt is not None else None
        if live is not None and adopt is not None:
            live.begin(adopt)
        out, err = Capture(self.max_output, live, 0), Capture(self.max_output, live, 1)
        pair = (out, err)
        cpu_before = _cpu_seconds()
        token = _current.set(pair)
        self._active = pair
        start = time.perf_counter()
        value: Any = _NO_VALUE
        error: dict[str, Any] | None = None
        stopped = False
        try:
            compiled, wants_value = self._compile(code, filename)
            value = self._execute(compiled, wants_value, pair)
        except KeyboardInterrupt as exc:
            stopped = True
            error = self._error(exc, filename)
        except BaseException as exc:  # noqa: BLE001 - the agent's errors are results
            error = self._error(exc, filename)
        finally:
            duration = (time.perf_counter() - start) * 1000
            _current.reset(token)
            self._active = None
            out.state = err.state = "stopped" if stopped else "done"
            if live is not None:
                live.end()
        result: dict[str, Any] = {
            "stdout": out.text(),
            "stderr": err.text(),
            "stdout_truncated": out.dropped > 0,
            "stderr_truncated": err.dropped > 0,
            "error": error,
            "duration_ms": duration,
            "usage": _usage(cpu_before),
            "has_value": False,
            "value": None,
            "value_is_repr": False,
            "value_truncated": False,
        }
        if error is None and value is not _NO_VALUE and value is not None:
            self._set_value(result, value)
        return result

    def _compile(self, code: str, filename: str) -> tuple[CodeType, bool]:
        lines = code.splitlines(keepends=True)
        linecache.cache[filename] = (len(code), None, lines, filename)
        try:
            tree = ast.parse(code, filename, "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            # The cell itself is at fault (a NUL byte, nesting too deep): no frame of the
            # parser, whose path names the worker's Python installation, is the agent's.
            raise exc.with_traceback(None) from None
        wants_value = False
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not code.rstrip().endswith(";"):
            last = tree.body[-1]
            assert isinstance(last, ast.Expr)
            target = ast.Name(id="__cm_value__", ctx=ast.Store())
            assign = ast.Assign(targets=[target], value=last.value)
            ast.copy_location(assign, last)
            ast.copy_location(target, last)
            tree.body[-1] = assign
            wants_value = True
        return compile(tree, filename, "exec", flags=_FLAGS, dont_inherit=True), wants_value

    def _execute(self, compiled: CodeType, wants_value: bool, pair: tuple[Capture, Capture]) -> Any:
        g = self.globals
        if compiled.co_flags & _CO_COROUTINE:
            coro = eval(compiled, g)
            self._event_loop().run_until_complete(coro)
        else:
            exec(compiled, g)
        if not wants_value:
            return _NO_VALUE
        value = g.pop("__cm_value__", None)
        if value is not None:
            g["_"] = value
        return value

    def _event_loop(self) -> Any:
        import asyncio

        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
        return self._loop

    def _set_value(self, result: dict[str, Any], value: Any) -> None:
        try:
            result["value"] = _json_safe(value, [_MAX_VALUE_JSON])
        except (ValueError, RecursionError, OverflowError):
            text = _safe_repr(value)
            if len(text) > _MAX_REPR:
                text = keep_head(text, _MAX_REPR, hint="the whole value is `_` in the session")
                result["value_truncated"] = True
            result["value"] = text
            result["value_is_repr"] = True
        result["has_value"] = True

    def _error(self, exc: BaseException, filename: str) -> dict[str, Any]:
        lineno: int | None = None
        offset: int | None = None
        if isinstance(exc, SyntaxError) and exc.filename == filename:
            lineno, offset = exc.lineno, exc.offset
            te = traceback.TracebackException(type(exc), exc, None)
        else:
            tb: TracebackType | None = exc.__traceback__
            te = traceback.TracebackException(type(exc), exc, tb)
            _trim(te)
            for frame in te.stack:
                if frame.filename == filename:
                    lineno = frame.lineno
        try:
            message = keep_head(str(exc), _MAX_REPR)
        except Exception:  # noqa: BLE001
            message = "<unprintable exception>"
        text = keep_ends("".join(te.format()), _MAX_REPR)
        return {
            "type": _type_name(exc),
            "message": message,
            "traceback": text,
            "lineno": lineno,
            "offset": offset,
        }


def install_routers(
    active: Callable[[], tuple[Capture, Capture] | None], fallback: bool
) -> tuple[Router, Router]:
    """Replace sys.stdout/sys.stderr with routers (once per process)."""
    if isinstance(sys.stdout, Router) and isinstance(sys.stderr, Router):
        return sys.stdout, sys.stderr
    out = Router(0, sys.stdout if fallback else None, active)
    err = Router(1, sys.stderr if fallback else None, active)
    sys.stdout, sys.stderr = out, err
    return out, err


def inherit_capture_in_threads() -> None:
    """Threads started by the agent's code write into the run that started them."""
    original = threading.Thread.start

    def start(self: threading.Thread) -> None:
        ctx = contextvars.copy_context()
        run = self.run
        self.run = lambda: ctx.run(run)  # type: ignore[method-assign]
        original(self)

    threading.Thread.start = start  # type: ignore[method-assign]
