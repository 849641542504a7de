"""Paths a server is given inside the sandbox's view, shown without following its links.

The sandbox's code owns what is in ``files/``: it makes links there and swaps them at will.
A server pointed at ``files/repo`` (``mcp.json``) used to get what ``realpath`` found
there when it started: the code made ``repo`` a link to ``/root``, and the next start
mounted ``/root`` into the server's jail and gave the server's uid an ACL on it. Such a
path is now shown as the view itself (``files/``, codemode's own directory), mounted
where the path enters it; the rest of the path is resolved inside the jail, where a link
leads only to what the jail shows. The ACL the server needs below is set on what is
reached from the view one step at a time with ``O_NOFOLLOW``: a link stops the walk.
Standard library only.
"""

from __future__ import annotations

import os
import stat
from contextlib import suppress
from dataclasses import dataclass

from . import acl, jail
from .paths import entry_into

__all__ = ["Inside", "foreign_link", "grant_inside", "sandbox_views", "through_views"]

_STEP = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class Inside:
    """A writable path given below a view: the view (host path) and the path below it."""

    view: str
    rest: str


def sandbox_views(workspace: str | None, files: str | None) -> set[str]:
    """Where the sandbox's code writes on the host (its ``files/``), links followed."""
    views = {os.path.realpath(files)} if files else set()
    if workspace is not None:
        views.add(os.path.realpath(os.path.join(workspace, "files")))
    return views


def through_views(
    mounts: list[jail.Mount], views: set[str]
) -> tuple[list[jail.Mount], list[Inside]]:
    """``mounts``, each one whose path (as the server names it) lies in a view replaced
    by that view, shown where the path enters it; and the writable paths below views.

    Raises ``ValueError`` for a path that enters a view through a link of the host's
    (``/srv/repo`` -> ``files/repo``): what it leads to is the sandbox's to change."""
    out: list[jail.Mount] = []
    inside: list[Inside] = []
    for m in mounts:
        door = entry_into(m.target, views) if views else None
        if door is None:
            link = foreign_link(m.target)
            if link is not None:
                raise ValueError(
                    f"{m.target} passes through {link}, a link of uid "
                    f"{os.lstat(link).st_uid}, which that user can point anywhere on the "
                    "host: give the server the path the link leads to"
                )
            out.append(m)
            continue
        real = os.path.realpath(door)
        if real not in views:
            raise ValueError(
                f"{m.target} leads into the sandbox's files ({real}) through a link "
                f"({door}), which its code could point anywhere: give the server the path "
                "under the workspace's files/ itself"
            )
        out.append(jail.Mount(real, door, writable=m.writable))
        rest = os.path.relpath(m.target, door)
        if m.writable and rest != ".":
            inside.append(Inside(real, rest))
    return out, inside


def foreign_link(path: str, *, hops: int = 40) -> str | None:
    """The first symlink on the way to ``path`` that neither root nor codemode's own user
    owns (a server's uid left it in a folder it writes, for one of its own or another
    server's paths), or None. A path that does not exist yet ends the walk."""
    trusted = {0, os.geteuid()}
    todo = [p for p in path.split("/") if p]
    done = "/"
    while todo:
        part = todo.pop(0)
        if part in (".", ""):
            continue
        if part == "..":
            done = os.path.dirname(done)
            continue
        here = os.path.join(done, part)
        try:
            st = os.lstat(here)
        except OSError:
            return None
        if not stat.S_ISLNK(st.st_mode):
            done = here
            continue
        if st.st_uid not in trusted:
            return here
        hops -= 1
        if hops < 0:
            return None  # a loop: the mount fails on its own
        target = os.readlink(here)
        todo = [p for p in target.split("/") if p] + todo
        if target.startswith("/"):
            done = "/"
    return None


def grant_inside(inside: Inside, uids: list[int]) -> None:
    """Give ``uids`` what a writable path below a view needs: rwx (and a default ACL) on
    the deepest directory of it reached without a link, and rw on the file it names if
    that is a regular file. Nothing a link leads to is touched. Raises ``OSError``."""
    fd = os.open(inside.view, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        parts = [p for p in inside.rest.split(os.sep) if p not in ("", ".")]
        below = False
        for i, part in enumerate(parts):
            if part == "..":
                break
            try:
                step = os.open(part, _STEP, dir_fd=fd)
            except OSError:  # missing, a link (ELOOP), a FIFO...: the walk ends here
                break
            mode = os.fstat(step).st_mode
            if stat.S_ISDIR(mode):
                os.close(fd)
                fd, below = step, True
                continue
            with suppress(OSError):
                if stat.S_ISREG(mode) and i == len(parts) - 1:
                    acl.grant_file_fd(step, uids)
            os.close(step)
            break
        if below:  # the view itself is shared as a mount of its own
            acl.grant_fd(fd, uids, inherit=True)
    finally:
        os.close(fd)
