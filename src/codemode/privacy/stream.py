"""Scan text that arrives in chunks (streamed output) without letting a value slip
between two chunks.

``StreamScanner.feed(chunk)`` returns the part of the stream that is now safe to send,
tokenized; ``close()`` returns the rest. It holds back the last ``hold`` characters
(longer than any value a detector finds in one piece) and never cuts inside a value it
detected, so ``"alice@ex"`` | ``"ample.com"`` comes out as one token. The last
``context`` characters already sent stay visible to the detectors, so a context word
("Tel.") in one chunk still counts for a number in the next. A value longer than the
hold window (a private-key block still open) is held until it ends, up to ``max_hold``
characters, after which the held text is scanned and sent as it is.

With ``lines`` (the default when every detector is line-local, see
``Scanner.line_local``), complete lines go out as soon as they end: no value a detector
finds spans a line break, so only the unfinished last line needs holding, and live
output stays live. A span the scanner sees crossing the line break still holds the cut.
"""

from __future__ import annotations

import re

from .engine import Privacy, Report
from .scan import Span

__all__ = ["StreamScanner"]


class StreamScanner:
    def __init__(
        self,
        engine: Privacy,
        *,
        hold: int = 512,
        context: int = 64,
        max_hold: int = 1 << 20,
        lines: bool | None = None,
    ) -> None:
        if hold < 1 or context < 0 or max_hold < hold:
            raise ValueError("need hold >= 1, context >= 0 and max_hold >= hold")
        self.engine = engine
        self.hold = hold
        self.context = context
        self.max_hold = max_hold
        self.lines = engine.scanner.line_local if lines is None else lines
        self.report = Report()
        self._seen = ""  # raw text already sent (its tail), for context only
        self._buf = ""
        self._checked = 0  # the buffer's lines before this were looked at (_wrapped_block)
        self._block = -1

    def feed(self, chunk: str) -> str:
        """Add ``chunk``; return what can be sent now (possibly empty)."""
        if not chunk:
            return ""
        self._buf += chunk
        if len(self._buf) <= self.hold and not (self.lines and _has_break(chunk)):
            return ""
        return self._emit(final=False)

    def close(self) -> str:
        """The rest of the stream, scanned."""
        return self._emit(final=True)

    def _emit(self, *, final: bool) -> str:
        if not self._buf:
            return ""
        ctx = self._seen
        text = ctx + self._buf
        cut = len(text) if final else len(text) - self.hold
        if self.lines and not final:
            # A block of wrapped lines is held whole (its value may span its lines); else
            # the complete lines go (a last "\r" may yet be a "\r\n": not complete).
            block = self._wrapped_block()
            cut = len(ctx) + block if block >= 0 else max(cut, len(ctx) + self._checked)
        full = False
        if cut <= len(ctx) and not final:  # nothing to release: no scan either
            if len(self._buf) < self.max_hold:
                return ""
            full = True
        spans = [s for s in self.engine.spans(text) if s.end > len(ctx)]
        for sp in spans:
            # Inside a value, or one that reaches the end so far (it may go on).
            if sp.start < cut < sp.end or (not final and sp.end == len(text) > sp.start):
                cut = min(cut, sp.start)
        if cut < len(ctx):
            cut = len(ctx)
        if cut == len(ctx) and not final:
            if not full and len(self._buf) < self.max_hold:
                return ""
            cut = len(text)  # a value longer than max_hold: send it, scanned
        out: list[str] = []
        pos = len(ctx)
        for sp in spans:
            if sp.start < pos or sp.end > cut:
                continue
            out.append(text[pos : sp.start])
            out.append(self._token(sp, text))
            pos = sp.end
        out.append(text[pos:cut])
        sent = text[len(ctx) : cut]
        self._buf = text[cut:]
        self._checked = max(0, self._checked - len(sent))
        self._block = self._block - len(sent) if self._block >= len(sent) else -1
        self._seen = (ctx + sent)[-self.context :] if self.context else ""
        return "".join(out)

    def _wrapped_block(self) -> int:
        """Where in the buffer a block of wrapped base64 lines (MIME, PEM) that is still
        going on starts; -1 when the last complete line is not one. Only lines not seen
        before are looked at: holding a long block costs linear time."""
        buf = self._buf
        end = max(buf.rfind("\n"), buf.rfind("\r")) + 1
        if end == len(buf) and buf.endswith("\r"):
            end -= 1  # its "\n" may be in the next chunk: that line is not complete yet
        pos = self._checked
        while pos < end:
            lf, cr = buf.find("\n", pos, end), buf.find("\r", pos, end)
            nl = lf if cr < 0 else cr if lf < 0 else min(lf, cr)
            if nl < 0:
                break
            if _WRAPPED.fullmatch(buf, pos, nl) is None:
                self._block = -1
            elif self._block < 0:
                self._block = pos
            pos = nl + (2 if buf.startswith("\r\n", nl) else 1)
        self._checked = pos
        return self._block

    def _token(self, sp: Span, text: str) -> str:
        self.report.found[sp.entity] += 1
        return self.engine.substitute(sp.entity, text[sp.start : sp.end])


_WRAPPED = re.compile(r"[A-Za-z0-9+/=_-]{40,}")


def _has_break(chunk: str) -> bool:
    return "\n" in chunk or "\r" in chunk
