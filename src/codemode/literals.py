"""Which of many literals a large text may hold, in one pass when google-re2 is installed.

The credentials net and the SSN detector run a pattern only where one of its anchors (a
literal such as ``token`` or ``ghp_``) occurs. ``anchor in text`` is a fast memory scan,
but it is one pass per anchor: the net's 26 anchors cost a 10 MB result 26 passes, more
than any detector. RE2 (the optional extra ``codemode[fast]``) matches a set of literals
in one linear pass and says which of them occur.

RE2 only narrows the look-ups, it never decides: ``possible`` returns the anchors RE2
saw (RE2 folds case at least as widely as the callers' look-ups: ASCII, and Unicode
simple folding such as the Kelvin sign), and the caller still looks those up its own
way. What is found is the same with or without RE2; only the number of passes changes.
Without RE2, or for a text too short to be worth a call, ``possible`` returns None.

Anchors made with ``shared=True`` (the credentials net's, the SSN detector's) are looked
for together: within ``one_pass(text)`` (the privacy scanner's detectors over one text),
the first of them to ask matches all of their literals in one RE2 pass, and the others
get their share of that answer instead of a pass of their own.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["MIN_CHARS", "Anchors", "one_pass", "re2_available"]

MIN_CHARS = 256
"""Texts shorter than this are looked up anchor by anchor (an RE2 call costs more). The
crossing is near 300 characters: one RE2 call costs ~1 us plus ~0.5 ns a character, and a
look-up of a literal of two or more characters ~0.7 ns a character (a 2.6K-character text:
the credentials net's 26 anchors 37 -> 9 us, the SSN detector's words 11 -> 6 us)."""

_UNSET: Any = object()
_re2: Any = _UNSET
_lock = threading.Lock()


def _module() -> Any:
    """``re2`` (google-re2), or None when it is not installed; imported once."""
    global _re2
    if _re2 is _UNSET:
        try:
            import re2  # type: ignore[import-untyped,unused-ignore]
        except ImportError:  # the pure-Python path: one look-up per anchor
            _re2 = None
        else:
            _re2 = re2
    return _re2


def re2_available() -> bool:
    return _module() is not None


class Anchors:
    """A set of ``(literal, ignore_case)`` anchors, looked for in one RE2 pass."""

    enabled = True
    """False in tests that compare against the plain look-ups (``reference_paths``)."""

    def __init__(self, anchors: Sequence[tuple[str, bool]], *, shared: bool = False) -> None:
        self.anchors = list(dict.fromkeys(anchors))
        self._set: Any = _UNSET
        self._keys = frozenset(self.anchors)
        self._shared = shared
        if shared:
            with _lock:
                _SHARED.append(self)
                _joint[0] = None  # compiled again with these anchors on next use

    def _compiled(self) -> Any:
        if self._set is _UNSET:
            with _lock:
                if self._set is _UNSET:
                    self._set = self._compile()
        return self._set

    def _compile(self) -> Any:
        re2 = _module()
        if re2 is None:
            return None
        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1
        latin1 = re2.Set.SearchSet(options)
        utf8 = re2.Set.SearchSet(re2.Options())
        for literal, fold in self.anchors:
            for target, encoding in ((latin1, "latin-1"), (utf8, "utf-8")):
                try:
                    pattern = re2.escape(literal.encode(encoding))
                except UnicodeEncodeError:  # another script: found in UTF-8 text only
                    pattern = b"$^"
                target.Add((b"(?i)" if fold else b"") + pattern)
        latin1.Compile()
        utf8.Compile()
        return latin1, utf8

    def possible(self, text: str) -> set[tuple[str, bool]] | None:
        """The anchors that may occur in ``text`` (a superset of those that do), or
        None when RE2 was not asked (not installed, disabled, or ``text`` is short)."""
        if len(text) < MIN_CHARS or not self.enabled:
            return None
        if self._shared and getattr(_scope, "text", None) is text:
            answer = _scope.answer
            if answer is None:
                answer = _scope.answer = _joint_anchors().possible(text)
            return None if answer is None else set(self._keys.intersection(answer))
        sets = self._compiled()
        if sets is None:
            return None
        # Text in Latin-1 (most Western text) is matched byte for byte; any other as
        # UTF-8, lone surrogates passed through (RE2 reads them as no character).
        try:
            data, which = text.encode("latin-1"), sets[0]
        except UnicodeEncodeError:
            data, which = text.encode("utf-8", "surrogatepass"), sets[1]
        anchors = self.anchors
        return {anchors[i] for i in which.Match(data) or ()}


_SHARED: list[Anchors] = []
_joint: list[Anchors | None] = [None]
_scope = threading.local()


def _joint_anchors() -> Anchors:
    """One ``Anchors`` of every shared one's literals (rebuilt when one is added)."""
    got = _joint[0]
    if got is None:
        with _lock:
            members = list(_SHARED)
        got = _joint[0] = Anchors([a for m in members for a in m.anchors])
    return got


class one_pass:  # (lower case: used like a function, as a context manager)
    """Within it, the shared anchors (``Anchors(shared=True)``) asked about ``text``
    are matched in one RE2 pass (per thread; nested for another text, as an encoded
    span's decoded text is scanned within the scan of its own)."""

    __slots__ = ("_prev", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._prev: tuple[Any, Any] = (None, None)

    def __enter__(self) -> None:
        self._prev = (getattr(_scope, "text", None), getattr(_scope, "answer", None))
        _scope.text, _scope.answer = self._text, None

    def __exit__(self, *exc: object) -> None:
        _scope.text, _scope.answer = self._prev
