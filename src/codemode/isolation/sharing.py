"""ACLs that let a jailed server's uid write what it was given, set through descriptors.

Under root a server runs as a uid of its own; the directories it is given writable (and,
in the workspace, the sandbox's uid too) get an ACL for it, and a default ACL for what is
created in them later. Each ACL is set through the descriptor the jail mounts (or one
walked the same way, :mod:`.views`): by name, it landed wherever a link swapped in
meanwhile led. Standard library only.
"""

from __future__ import annotations

import logging
import os
import stat

from . import acl, datafiles, jail
from .views import Refused, reach, reopen

log = logging.getLogger("codemode.isolation.servers")

__all__ = ["share"]


def share(
    data: list[jail.Mount],
    uid: int,
    sandbox_uid: int,
    workspace: str | None,
    own: datafiles.DataFiles,
    ids: dict[tuple[int, int], str],
) -> None:
    """Let the server's uid write the directories it was given writable (ACL on each
    directory, and a default ACL for what is created in it later; in the workspace, the
    sandbox's uid too), and the data files it may write (a file ACL). A folder shown only
    for its data files gets no default ACL outside the workspace: what others put there
    later stays theirs. World-writable directories (``/tmp``) are left as they are. Each
    ACL is set through the descriptor the jail mounts (or one walked the same way)."""
    by_src = {m.src: m.fd for m in data if m.fd is not None}
    for m in data:
        if m.fd is not None and m.writable and m.src not in own.folders:
            _grant(m.src, m.fd, uid, sandbox_uid, workspace, inherit=True)
    for folder in dict.fromkeys(own.folders):
        _grant(folder, by_src.get(folder), uid, sandbox_uid, workspace, inherit=False, ids=ids)
    for path in own.writable:
        _grant(path, by_src.get(path), uid, sandbox_uid, workspace, inherit=False, ids=ids,
               file=True)  # fmt: skip


def _grant(
    path: str, fd: int | None, uid: int, sandbox_uid: int, workspace: str | None, *,
    inherit: bool, ids: dict[tuple[int, int], str] | None = None, file: bool = False,
) -> None:  # fmt: skip
    in_ws = workspace is not None and _within(path, workspace)
    found = None
    try:
        if fd is None:  # not mounted itself: walked as a mount would be
            found = reach(path, ids or {})
            fd = found.fd
        if fd is None:
            return
        mode = os.fstat(fd).st_mode
        if file != stat.S_ISREG(mode) or (not file and not stat.S_ISDIR(mode)):
            return
        if not in_ws and not file and mode & stat.S_IWOTH:
            return
        who = [uid, sandbox_uid] if in_ws else [uid]
        opened = reopen(fd, directory=not file)
        try:
            if file:
                acl.grant_file_fd(opened, who, path)
            else:
                acl.grant_fd(opened, who, inherit=inherit or in_ws)
        finally:
            os.close(opened)
    except (OSError, Refused) as exc:
        log.warning("cannot share %s with uid %s (ACL): %s", path, uid, exc)
    finally:
        if found is not None:
            found.close()


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
