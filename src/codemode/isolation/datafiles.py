"""What a jailed server sees of a data file it is given: the file, never its neighbours.

A server given ``~/notes.json`` (or ``MEMORY_FILE_PATH=/srv/data/memory.jsonl``) used to
get the whole folder writable, and under root an ACL for its uid on it: the agent's code
driving it could then read or rewrite ``~/.ssh`` beside the file. What it is shown now:

- **read-only** (the entry says ``"read_only": true``, lists the file in
  ``read_only_paths``, or the file has no write permission bit at all): the file alone,
  read-only. A file not there yet is not shown (there is nothing to read).
- **writable**: its folder, writable, with everything that was in it when the server
  starts shown empty (a directory as an empty read-only one, anything else as an empty
  read-only file), but the file itself and its side files (names that start with the
  file's name: ``db.sqlite-journal``, ``memory.jsonl.<hex>.tmp``). Writing in place,
  creating the file, replacing it by a rename (server-memory) and a database's journal
  all work; nothing that was already there can be read, changed, renamed or removed
  (each sits under a mount). What other programs put there while the server runs is
  visible to it. Symlinks are left as they are: each leads to what the jail shows at
  its target.
- a folder the server is given whole and writable (an argument, ``writable_paths``) is
  shown whole; inside one given read-only (``read_only_paths``), a writable file's folder
  is writable as above, its other entries staying read-only rather than hidden.

Past :data:`MAX_NEIGHBOURS` entries (``/tmp``) the file is shown alone, writable in place
(a warning says so), and a file not there yet cannot be: the server does not start, and
says to give its folder in ``writable_paths`` or move the file into a folder of its own.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from . import jail
from .paths import NamedPath

log = logging.getLogger(__name__)

MAX_NEIGHBOURS = 1000
"""Entries beside a writable data file that are each covered by a mount of their own."""


@dataclass
class DataFiles:
    """The mounts for a server's data files, and what to show empty inside them."""

    mounts: list[jail.Mount] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    """Directories shown empty (jail paths)."""
    hidden_files: list[str] = field(default_factory=list)
    """Other entries shown as an empty file (jail paths)."""
    folders: list[str] = field(default_factory=list)
    """Host folders of writable files: under root, an ACL lets the server create files
    there (a default ACL only inside the workspace: what others put there stays theirs)."""
    writable: list[str] = field(default_factory=list)
    """Host files the server may write: given a file ACL under root."""
    problem: str | None = None


def plan(
    files: Iterable[NamedPath],
    given: Sequence[jail.Mount],
    *,
    read_only: bool = False,
    declared_read_only: set[str] | frozenset[str] = frozenset(),
) -> DataFiles:
    """What to mount for the data ``files`` a server is given (each in an existing folder),
    beside the mounts it is ``given`` otherwise."""
    out = DataFiles()
    dirs = [(m.src if m.fd is not None else os.path.realpath(m.src), m.writable) for m in given]
    dirs = [(d, w) for d, w in dirs if os.path.isdir(d)]
    # host folder -> (jail folder, names kept, its other entries given read-only)
    own: dict[str, tuple[str, set[str], bool]] = {}
    files_in: dict[str, list[NamedPath]] = {}
    for f in files:
        exists = os.path.isfile(f.real)
        covers = [w for d, w in dirs if _within(os.path.dirname(f.real), d)]
        if read_only or f.real in declared_read_only or (exists and not _has_write_bit(f.real)):
            if exists:
                out.mounts.append(jail.Mount(f.real, f.literal))
        elif any(covers):  # its folder is given whole, writable (made before: no ACL yet)
            out.folders.append(os.path.dirname(f.real))
            if exists:
                out.writable.append(f.real)
        else:
            folder = os.path.dirname(f.real)
            target, names, _ = own.setdefault(
                folder, (os.path.dirname(f.literal), set(), bool(covers))
            )
            files_in.setdefault(folder, []).append(f)
            names.update({os.path.basename(f.real), os.path.basename(f.literal)})
            if exists:
                out.writable.append(f.real)
    for folder, (target, names, shown) in own.items():
        out.mounts.append(jail.Mount(folder, target, writable=True))
        out.folders.append(folder)
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            out.problem = f"cannot list {folder}, the folder of a file it is given: {exc}"
            return out
        others = [e for e in entries if not any(e.name.startswith(n) for n in names)]
        if len(others) > MAX_NEIGHBOURS:
            out.mounts.pop()  # too many to hide one by one: the files alone, if there
            out.folders.pop()
            alone = [f for f in files_in.get(folder, []) if os.path.isfile(f.real)]
            if len(alone) < len(files_in.get(folder, [])):
                out.problem = (
                    f"{folder} holds {len(others)} entries besides the file(s) it is "
                    f"given ({', '.join(sorted(names))}), more than the {MAX_NEIGHBOURS} "
                    "that can be hidden one by one, and a file it must create there cannot "
                    'be shown alone: give the folder whole in "writable_paths", or move '
                    "the file into a folder of its own"
                )
                return out
            out.mounts += [jail.Mount(f.real, f.literal, writable=True) for f in alone]
            log.warning(
                "%s holds %d entries besides %s: only the file itself is shown to the "
                "server, writable in place (replacing it by a rename, or a journal beside "
                'it, needs the folder in "writable_paths")',
                folder, len(others), ", ".join(sorted(names)),
            )  # fmt: skip
            continue
        for e in others:
            path = os.path.join(target, e.name)
            try:
                mode = e.stat(follow_symlinks=False).st_mode
            except OSError:
                continue  # gone meanwhile
            if stat.S_ISLNK(mode):
                continue
            if shown:  # given read-only with the folder above: it stays so
                out.mounts.append(jail.Mount(e.path, path))
            else:
                (out.hidden if stat.S_ISDIR(mode) else out.hidden_files).append(path)
    return out


def _has_write_bit(path: str) -> bool:
    try:
        return bool(os.stat(path).st_mode & 0o222)
    except OSError:
        return True


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


__all__ = ["MAX_NEIGHBOURS", "DataFiles", "plan"]
