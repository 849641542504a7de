"""The credentials net: secrets never leave the host in text meant for a model or a person.

One implementation for every caller: :func:`redact_text` for text from outside codemode's
own words (an upstream server's stderr tail or error message, a log line), and the privacy
scanner's ``SECRET`` detector (``codemode.privacy.secrets``), which uses
:func:`find_secrets` and redacts what it finds, never tokenizes it (a credential has no
business in a sink's arguments either). It finds

- values codemode knows are secret: those ``${VAR}`` expansions put into ``mcp.json`` /
  ``config.json`` (the config loader calls :func:`remember_secret`), and host environment
  variables whose names look secret (``*TOKEN*``, ``*KEY*``, ``*SECRET*``, ``*PASSWORD*``...,
  read by :func:`remember_environment`);
- credential shapes: ``Bearer``/``Basic`` credentials, ``key=value`` pairs whose key looks
  secret, passwords in URLs, PEM private-key blocks, and API keys of common vendors
  (OpenAI/Anthropic ``sk-``, GitHub, GitLab, Slack, AWS, Google, Stripe, JWTs).

It is a net, not a guarantee. Standard library only, cheap to import: ``codemode.config``
imports it, and it works whether privacy is on or off.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from codemode.literals import Anchors

__all__ = [
    "NOT_SECRET_VARS",
    "REDACTED",
    "find_secrets",
    "forget_secrets",
    "known_multiline",
    "redact_text",
    "remember_environment",
    "remember_secret",
    "secret_name",
    "secrets_generation",
    "secrets_of",
]

REDACTED = "[redacted]"
MIN_SECRET = 6
"""Shorter remembered values are ignored: redacting every ``on`` or ``1`` garbles text."""

NOT_SECRET_VARS = frozenset(
    {"HOME", "USER", "LOGNAME", "PATH", "PWD", "SHELL", "TERM", "TMPDIR", "LANG", "LC_ALL"}
)

_SECRET_WORDS = (
    r"api[_-]?key|apikey|token|secret|passw(?:or)?d|pwd|credential|private[_-]?key"
    r"|access[_-]?key|session[_-]?key|auth|cookie"
)
_SECRET_NAME = re.compile(rf"(?i)({_SECRET_WORDS})")

# (pattern, group holding the secret (0: the whole match), anchors): a pattern runs only
# when one of its anchors occurs in the text (``str.__contains__`` is a fast memory scan,
# a regex starting with ``\b`` tries every position of a 10 MB result).
_SHAPES: tuple[tuple[re.Pattern[str], int, tuple[str, ...]], ...] = (
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.S,
        ),
        0,
        ("-----BEGIN",),
    ),
    (
        re.compile(r"(?i)\b(?:bearer|basic)\s+([A-Za-z0-9._~+/=-]{8,})"),
        1,
        ("bearer", "basic"),
    ),
    # ``Token <key>`` (an HTTP scheme too): only with a digit, "token validation" is prose.
    (re.compile(r"(?i)\btoken\s+((?=[A-Za-z._~+/=-]*\d)[A-Za-z0-9._~+/=-]{16,})"), 1, ("token",)),
    (re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^/\s:@\[\]]+:([^/\s@\[\]]+)@"), 1, ("://",)),
    (
        re.compile(
            r"""(?ix)
            \b[\w.-]*(?:api[_-]?key|apikey|token|secret|passw(?:or)?d|pwd|credential
                |private[_-]?key|access[_-]?key|authorization)[\w.-]*["']?\s*[:=]\s*["']?
            (?:bearer\s+|basic\s+)?
            ((?!\[)(?=[^\s"',;&]*\d)[^\s"',;&]{6,}|(?!\[)[^\s"',;&]{12,})
            """
        ),
        1,
        ("key", "token", "secret", "passw", "pwd", "credential", "authorization"),
    ),
    (re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}"), 0, ("sk-",)),
    # Anchored on the whole prefix: "gh" alone is in much English prose ("through").
    (
        re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}"),
        0,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), 0, ("github_pat_",)),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), 0, ("glpat-",)),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), 0, ("xox",)),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), 0, ("AKIA", "ASIA")),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), 0, ("AIza",)),
    (re.compile(r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}"), 0, ("_live_", "_test_")),
    (
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        0,
        ("eyJ",),
    ),
)

# (pattern, group, anchors as looked up, whether in the lower-cased text); the flags are
# read once here (``RegexFlag.__and__`` is Python code, slow per call).
_GATED = tuple(
    (
        pattern,
        group,
        tuple(a.lower() for a in anchors) if pattern.flags & re.IGNORECASE else anchors,
        bool(pattern.flags & re.IGNORECASE),
    )
    for pattern, group, anchors in _SHAPES
)

_ASCII = {a: a.encode("ascii") for _, _, anchors, _ in _GATED for a in anchors}
# The anchors of every shape, looked for in one pass of a large text when google-re2 is
# installed (``codemode.literals``); those it did not see are known absent at once.
_ANCHORS = Anchors([(a, folded) for _, _, anchors, folded in _GATED for a in anchors], shared=True)


def _lowered(text: str) -> str | bytes:
    """``text.lower()`` for the anchors' look-ups. Text in Latin-1 (names with accents)
    as bytes lowered in ASCII: no Latin-1 letter lowers to an ASCII one, so every ASCII
    anchor is found where ``str.lower`` finds it, at several times the speed."""
    if text.isascii():
        return text.lower()
    try:
        return text.encode("latin-1").lower()
    except UnicodeEncodeError:  # other scripts: "\u212a" (Kelvin) lowers to "k"
        return text.lower()


_known: dict[str, set[str | None]] = {}
"""Remembered value -> whose it is: a tenant's (its configuration's ``${VAR}``), or None
for the host's (its environment), which is everyone's to never see."""
_owner: ContextVar[str | None] = ContextVar("codemode_secrets_owner", default=None)
_lock = threading.Lock()
_HOST: Any = object()
_generation = 0
"""Changes whenever ``_known`` does: what :func:`find_secrets` finds in a text may differ."""
_known_set: tuple[int, list[str], Anchors] | None = None
"""(``_generation``, the remembered values, them as one RE2 set), rebuilt when they change:
a large text is read once for all of them, not once per value (a host with fifty secret
environment variables read a 10 MB result fifty times)."""


def _remembered() -> tuple[list[str], Anchors]:
    """The remembered values and their set, current."""
    global _known_set
    with _lock:
        got = _known_set
        if got is None or got[0] != _generation:
            values = sorted(_known)
            got = _known_set = (_generation, values, Anchors([(v, False) for v in values]))
    return got[1], got[2]


def _encodable(value: str) -> bool:
    """Whether RE2 can be given ``value`` (a value read from the environment may hold
    lone surrogates, for bytes that were not UTF-8: those are always looked up)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def secret_name(name: str) -> bool:
    """Whether a variable, header or field called ``name`` probably holds a credential."""
    return bool(_SECRET_NAME.search(name))


@contextmanager
def secrets_of(owner: str | None) -> Iterator[None]:
    """Within this block (and the tasks it starts), secrets remembered are ``owner``'s and
    text is searched for ``owner``'s and the host's only.

    ``codemode serve --tenants`` runs each tenant's requests in its own block: redacting
    another tenant's secrets in this one's text told this one which of its guesses (a
    list of common passwords printed by its code) was that tenant's database password."""
    token = _owner.set(owner)
    try:
        yield
    finally:
        _owner.reset(token)


def remember_secret(value: str, *, owner: str | None = _HOST) -> None:
    """Treat ``value`` as a secret wherever it appears from now on: for everyone, or,
    within ``secrets_of(tenant)`` (or given ``owner``), in that tenant's text."""
    if not isinstance(value, str):
        return
    value = value.strip()
    whose = _owner.get() if owner is _HOST else owner
    global _generation
    if len(value) >= MIN_SECRET:
        with _lock:
            owners = _known.setdefault(value, set())
            if whose not in owners:
                owners.add(whose)
                _generation += 1


def remember_environment(env: Mapping[str, str] | None = None) -> None:
    """Remember the values of environment variables whose names look secret (the host's:
    looked for in every tenant's text)."""
    env = os.environ if env is None else env
    for name, value in env.items():
        if name not in NOT_SECRET_VARS and secret_name(name):
            remember_secret(value, owner=None)


def known_multiline() -> bool:
    """Whether a remembered secret spans lines (a PEM key in a variable): then text
    must not be released line by line before the rest of it has been seen."""
    with _lock:
        return any("\n" in v or "\r" in v for v in _known)


def forget_secrets() -> None:
    """Forget every remembered value (tests)."""
    global _generation
    with _lock:
        _known.clear()
        _generation += 1


def secrets_generation() -> int:
    """A number that changes whenever the remembered secrets do (callers that keep what
    :func:`find_secrets` found in a text compare it before reusing that)."""
    return _generation


def _theirs(values: list[str]) -> list[str]:
    """The remembered ``values`` the current owner's text is searched for."""
    owner = _owner.get()
    if owner is None:
        return values
    with _lock:
        return [v for v in values if not _known.get(v, {None}).isdisjoint((None, owner))]


def find_secrets(text: str) -> Iterator[tuple[int, int]]:
    """Spans of ``text`` that hold a secret (may overlap; callers merge them)."""
    known, remembered = _remembered()
    known = _theirs(known)
    if len(known) > 1:
        # RE2 says which values may occur (a superset); those are looked up as before.
        possible = remembered.possible(text)
        if possible is not None:
            known = [v for v in known if (v, False) in possible or not _encodable(v)]
    for value in known:
        start = text.find(value)
        while start != -1:
            yield start, start + len(value)
            start = text.find(value, start + len(value))
    # Anchors are looked up with ``in`` (a memory scan, in the lower-cased text for
    # case-insensitive shapes): one alternation regex over them costs more than every
    # other detector together on a large result.
    lower: str | bytes | None = None
    looked: dict[tuple[str, bool], bool] = {}  # an anchor gating two shapes: looked up once
    possible = _ANCHORS.possible(text)
    if possible is not None:
        if not possible:
            return  # no anchor of any shape (most tool results): nothing more to look at
        looked = {k: False for k in _ANCHORS.anchors if k not in possible}
    for pattern, group, anchors, folded in _GATED:
        hit = False
        for a in anchors:
            got = looked.get((a, folded))
            if got is None:
                where: str | bytes = text
                if folded:  # (lowered only when an anchor must be looked up in it)
                    if lower is None:
                        lower = _lowered(text)
                    where = lower
                got = looked[a, folded] = (
                    a in where if isinstance(where, str) else _ASCII[a] in where
                )
            if got:
                hit = True
                break
        if hit:
            for m in pattern.finditer(text):
                yield m.start(group), m.end(group)


def redact_text(text: str) -> str:
    """``text`` with every secret :func:`find_secrets` finds replaced by ``[redacted]``."""
    if not text:
        return text
    spans = sorted(find_secrets(text))
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end in spans:
        if end <= pos:
            continue
        if start < pos:
            start = pos
        out.append(text[pos:start])
        out.append(REDACTED)
        pos = end
    out.append(text[pos:])
    return "".join(out)
