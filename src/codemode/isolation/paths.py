"""The host paths a server's configuration names: one reading for every caller.

Two decisions hang on it: whether a server is a privacy sink (:mod:`codemode.privacy.sinks`)
and whether it is jailed without network (:mod:`.servers`). Each read the configuration
its own way, and a server given bare ``files`` or ``--roots=/srv,<ws>/files`` got tokens
(it writes into the sandbox's view) yet ran unjailed with network: the two must never
disagree on what a server was given, so both read it here and keep only their own verdict.

Read as paths: each argument, each ``env`` value and ``cwd``, whole and then word by word
(``--root=a``, ``a,b``, ``a;b``, ``PATH``'s ``a:b``, JSON, quotes, ``file://``). A word
starting with ``/``, ``~``, ``./`` or ``../`` is a path; a bare word (``files``,
``files/exports``) is one only if its first step exists where the server starts (what
follows may be made by the server later): ``stdio``, ``--port`` or ``.js`` are not.
Relative paths start from the server's ``cwd``; a relative ``cwd`` starts from the folder
of the file the entry was read from (``config_dir``), and so does a server without one
(where codemode runs, for an entry built in code). A jail starts the server there too, so a
relative path leads to the same place inside and outside it. Standard library only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "NamedPath",
    "config_dir",
    "entry_into",
    "named_paths",
    "reaches",
    "server_cwd",
    "touches_workspace",
    "workspace_roots",
]

_WORDS = re.compile(r"[\s=:,;]+")
"""Where one path of an argument or variable ends: ``--root=a``, ``PATH``'s ``a:b``,
lists written ``a,b`` or ``a;b``, a JSON object's ``"key": "value"``."""
_QUOTES = "\"'`()[]{}<>"


@dataclass(frozen=True)
class NamedPath:
    """One path a server was given."""

    literal: str
    """Absolute, as the server names it (symlinks kept): where a jail must show it."""
    real: str
    """Symlinks followed: where it leads on the host."""
    key: str | None = None
    """The ``env`` variable it came from; None for an argument or ``cwd``."""


def config_dir(server: Any) -> str:
    """Where a relative ``cwd`` starts: the folder of the entry's file, else where codemode
    runs."""
    return getattr(server, "config_dir", None) or os.getcwd()


def server_cwd(server: Any) -> str:
    """Where ``server`` starts, in its jail or not: its ``cwd`` (relative to
    :func:`config_dir`), else :func:`config_dir`."""
    cwd = getattr(server, "cwd", None)
    here = config_dir(server)
    return os.path.abspath(os.path.join(here, os.path.expanduser(cwd))) if cwd else here


def named_paths(server: Any) -> Iterator[NamedPath]:
    """Every host path ``server`` (any server configuration; non-stdio ones name none) is
    given in its arguments, ``env`` values and ``cwd``, each once."""
    here = config_dir(server)
    start = server_cwd(server)
    values: list[tuple[str, str, str | None]] = [
        (str(a), start, None) for a in getattr(server, "args", ()) or ()
    ]
    cwd = getattr(server, "cwd", None)
    if cwd:
        values.append((str(cwd), here, None))
    env = getattr(server, "env", None) or {}
    values.extend((str(v), start, str(k)) for k, v in env.items())
    seen: set[tuple[str, str | None]] = set()
    for raw, base, key in values:
        # The whole value (a path may hold a comma or a space), then each of its words.
        for word in (raw, *_WORDS.split(raw)):
            literal = _as_path(word.strip(_QUOTES), base)
            if literal is None or (literal, key) in seen:
                continue
            seen.add((literal, key))
            try:
                real = os.path.realpath(literal)
            except (OSError, ValueError):
                continue
            yield NamedPath(literal, real, key)


def _as_path(part: str, base: str) -> str | None:
    if part.startswith("//"):  # what ``file://`` leaves once split at its colon
        part = "/" + part.lstrip("/")
        if part == "/":  # ``http://`` alone names no path
            return None
    marked = part.startswith(("/", "~", "./", "../")) or part in (".", "..")
    try:
        if not marked:
            if not part or part.startswith("-"):
                return None
            first = Path(part).parts[0]
            if not os.path.lexists(os.path.join(base, first)):
                return None
        return os.path.abspath(os.path.join(base, os.path.expanduser(part)))
    except (OSError, ValueError, IndexError):  # a NUL byte, an unknown ~user
        return None


def workspace_roots(workspace: Path | str, *files: Path | str | None) -> set[str]:
    """Where the sandbox's view leads on the host: the workspace and its ``files`` (and any
    other ``files`` given), each followed through symlinks."""
    roots = {os.path.realpath(workspace), os.path.realpath(os.path.join(workspace, "files"))}
    roots.update(os.path.realpath(f) for f in files if f is not None)
    return roots


def reaches(real: str, roots: Iterable[str]) -> bool:
    """Whether a path (symlinks followed) is one of ``roots``, inside one, or above one:
    a server given any of these can write into the sandbox's view."""
    return any(_within(real, r) or _within(r, real) for r in roots)


def touches_workspace(server: Any, workspace: Path | str) -> bool:
    """Whether ``server`` is given a path inside ``workspace`` (args, cwd or env).

    Inside means where the sandbox's view leads: the workspace and its ``files``, each
    followed through symlinks (a ``files`` that links elsewhere puts that place in the
    sandbox's view), so a server given either name of it writes into the sandbox. A path
    named inside is inside whatever its links lead to now (``entry_into``): the sandbox's
    code can point one elsewhere until the server starts, and back. Privacy gives such a
    server tokens; its jail has no network."""
    roots = workspace_roots(workspace)
    return any(
        reaches(p.real, roots) or entry_into(p.literal, roots) is not None
        for p in named_paths(server)
    )


def entry_into(literal: str, roots: Iterable[str]) -> str | None:
    """Where ``literal`` (an absolute path as a server names it) enters one of ``roots``:
    its shortest prefix that leads, symlinks followed, to a root or below one; None when
    no prefix does.

    What lies below that prefix is not the host's to follow: under the sandbox's
    ``files/`` its code makes and swaps links at will, so ``files/repo`` may lead to
    ``/root`` by the time a server starts. A jail shows the root itself there, and the
    rest of the path is then resolved inside the jail, where such a link leads nowhere."""
    roots = [r.rstrip("/") or "/" for r in roots]
    parts = literal.split("/")
    for i in range(2, len(parts) + 1):
        prefix = "/".join(parts[:i]) or "/"
        try:
            real = os.path.realpath(prefix)
        except (OSError, ValueError):
            return None
        if any(_within(real, r) for r in roots):
            return prefix
    return None


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
