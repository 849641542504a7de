"""A server's paths reached one step at a time, and held by descriptor until they are mounted.

A path names what it leads to only at the moment it is resolved. Resolved with
``realpath`` and mounted by name later, ``files/repo`` became whatever the sandbox's code
made it in between (a link to ``/root`` got ``/root`` mounted into a server's jail, with an
ACL for its uid); outside ``files/``, a uid that writes a directory on a server's path can
swap a link there between codemode's check and bubblewrap's mount. So each path is walked
from ``/`` one component at a time (``openat`` with ``O_PATH|O_NOFOLLOW``, from the
previous step's descriptor), the policy applied to what each step opened, and the last
descriptor is what the jail mounts (``bwrap --bind-fd``) and what ACLs are set through:
what is swapped on the host after the walk changes nothing.

The walk's policy:

- a link owned by root or codemode's own user is followed (the host's ``/bin``, an
  administrator's ``/srv/data``); one any other uid owns is refused: that user (a server's
  uid, in a folder it writes) can point it anywhere on the host;
- once the walk is inside the sandbox's view (its ``files/``, known by device and inode),
  every link is refused, and so is a ``..`` that would leave it: the sandbox's code makes
  and re-points links there at will. Refusing (rather than resolving the link inside the
  view) keeps one reading of a path for every server: the server does not start and says
  which link to replace by the path it leads to.

Standard library only.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from . import jail

__all__ = [
    "Reached",
    "Refused",
    "by_fd",
    "reach",
    "reopen",
    "resolve",
    "sandbox_views",
    "view_ids",
]

_STEP = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_HOPS = 40


class Refused(ValueError):
    """A path the walk will not follow (a link the sandbox or another uid controls)."""


@dataclass
class Reached:
    """Where a path led: an ``O_PATH`` descriptor of it (None when it does not exist yet:
    the walk stopped at the first missing step), the host path the walk found (links
    resolved as followed; the missing steps appended as named), and the view it lies in."""

    fd: int | None
    path: str
    view: str | None
    mode: int = 0

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def sandbox_views(workspace: str | None, files: str | None) -> set[str]:
    """Where the sandbox's code writes on the host (its ``files/``), links followed."""
    views = {os.path.realpath(files)} if files else set()
    if workspace is not None:
        views.add(os.path.realpath(os.path.join(workspace, "files")))
    return views


def view_ids(views: Iterable[str]) -> dict[tuple[int, int], str]:
    """The views by device and inode, as the walk recognises them (missing ones left out)."""
    out: dict[tuple[int, int], str] = {}
    for v in views:
        try:
            st = os.stat(v)
        except OSError:
            continue
        out[(st.st_dev, st.st_ino)] = v
    return out


def reach(literal: str, views: dict[tuple[int, int], str]) -> Reached:
    """Walk the absolute path ``literal`` from ``/`` under the policy above; the caller
    closes the descriptor. Raises :class:`Refused`, or ``OSError`` for a step that cannot
    be opened for another reason than not existing."""
    trusted = {0, os.geteuid()}
    fd = os.open("/", _STEP | os.O_DIRECTORY)
    done, view, depth, hops = "/", views.get(_id(fd)), 0, _HOPS
    todo = [p for p in literal.split("/") if p not in ("", ".")]
    try:
        while todo:
            part = todo.pop(0)
            if part == "..":
                if view is not None and depth == 0:
                    raise Refused(
                        f"{literal} leaves the sandbox's files ({view}) through '..' in a "
                        "link's target: name the path it leads to"
                    )
                up = os.open("..", _STEP | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd, done, depth = up, os.path.dirname(done), depth - 1
                if view is None:
                    view, depth = views.get(_id(fd)), 0
                continue
            try:
                step = os.open(part, _STEP, dir_fd=fd)
            except (FileNotFoundError, NotADirectoryError):
                return Reached(None, os.path.join(done, part, *todo), view)
            here = os.path.join(done, part)
            st = os.fstat(step)
            if not stat.S_ISLNK(st.st_mode):
                os.close(fd)
                fd, done, depth = step, here, depth + 1
                if view is None and (found := views.get((st.st_dev, st.st_ino))):
                    view, depth = found, 0
                continue
            try:
                _check_link(literal, here, st, view, trusted)
                target = os.readlink("", dir_fd=step)  # the link opened, not its name again
            finally:
                os.close(step)
            hops -= 1
            if hops < 0:
                raise Refused(f"{literal}: too many links on the way (a loop?)")
            todo = [p for p in target.split("/") if p not in ("", ".")] + todo
            if target.startswith("/"):
                os.close(fd)
                fd = os.open("/", _STEP | os.O_DIRECTORY)
                done, view, depth = "/", views.get(_id(fd)), 0
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    return Reached(fd, done, view, mode)


def _check_link(literal: str, here: str, st: os.stat_result, view: str | None,
                trusted: set[int]) -> None:  # fmt: skip
    if view is not None:
        raise Refused(
            f"{literal} passes through {here}, a link inside the sandbox's files ({view}), "
            "which its code can point anywhere: a server is shown paths there only as they "
            "are; give it the path the link leads to"
        )
    if st.st_uid not in trusted:
        raise Refused(
            f"{literal} passes through {here}, a link of uid {st.st_uid}, which that user "
            "can point anywhere on the host: give the server the path the link leads to"
        )


def resolve(literal: str, views: dict[tuple[int, int], str]) -> str:
    """Where :func:`reach` finds ``literal`` now (a host path), nothing kept open."""
    found = reach(literal, views)
    found.close()
    return found.path


def by_fd(
    mounts: Iterable[jail.Mount], views: dict[tuple[int, int], str], held: list[int]
) -> list[jail.Mount]:
    """``mounts``, each walked from where the server names it (its target) and held by
    descriptor (added to ``held``, which the caller closes); those not there are left out.
    Raises :class:`Refused`."""
    out: list[jail.Mount] = []
    for m in mounts:
        found = reach(m.target, views)
        if found.fd is None:
            continue
        held.append(found.fd)
        out.append(jail.Mount(found.path, m.target, writable=m.writable, fd=found.fd))
    return out


def reopen(fd: int, *, directory: bool) -> int:
    """A readable descriptor of what the ``O_PATH`` descriptor ``fd`` holds (ACLs cannot be
    set through ``O_PATH``): opened through ``/proc/self/fd``, which leads to that very
    inode whatever its name leads to now."""
    flags = os.O_RDONLY | os.O_CLOEXEC | (os.O_DIRECTORY if directory else os.O_NONBLOCK)
    return os.open(f"/proc/self/fd/{fd}", flags)


def _id(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino
