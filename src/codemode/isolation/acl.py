"""POSIX ACLs written as the kernel's xattr, so two unprivileged uids can share a directory.

A workspace's ``files/`` belongs to the sandbox's uid; an upstream server given it runs as
another uid. A default ACL on the directory gives both read-write access to everything
created in it from then on, whoever creates it (the umask does not apply under a default
ACL). No ``setfacl`` binary is needed: the format is fixed (``linux/posix_acl_xattr.h``).
"""

from __future__ import annotations

import errno
import os
import stat
import struct

ACCESS = "system.posix_acl_access"
DEFAULT = "system.posix_acl_default"
_VERSION = 2
_HEAD = struct.Struct("<I")
_ENTRY = struct.Struct("<HHI")
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_NONE = 0xFFFFFFFF

Entries = dict[tuple[int, int], int]


def _decode(raw: bytes) -> Entries:
    (version,) = _HEAD.unpack_from(raw)
    if version != _VERSION:
        raise ValueError(f"unknown ACL version {version}")
    return {
        (tag, ident): perm
        for tag, perm, ident in (
            _ENTRY.unpack_from(raw, off) for off in range(_HEAD.size, len(raw), _ENTRY.size)
        )
    }


def _encode(entries: Entries) -> bytes:
    body = b"".join(_ENTRY.pack(tag, perm, ident) for (tag, ident), perm in sorted(entries.items()))
    return _HEAD.pack(_VERSION) + body


def _from_mode(mode: int) -> Entries:
    return {
        (USER_OBJ, _NONE): (mode >> 6) & 7,
        (GROUP_OBJ, _NONE): (mode >> 3) & 7,
        (OTHER, _NONE): mode & 7,
    }


def _read(fd: int, name: str, mode: int) -> Entries:
    try:
        return _decode(os.getxattr(fd, name))
    except OSError as exc:
        if exc.errno != errno.ENODATA:
            raise
        return _from_mode(mode)


def _with_users(entries: Entries, uids: list[int], perm: int = 7) -> Entries:
    out = dict(entries)
    for uid in uids:
        out[(USER, uid)] = perm
    group_class = [p for (tag, _), p in out.items() if tag in (USER, GROUP_OBJ, GROUP)]
    out[(MASK, _NONE)] = 0
    for p in group_class:
        out[(MASK, _NONE)] |= p
    return out


def grant(path: str, uids: list[int], *, inherit: bool = True) -> None:
    """Give ``uids`` rwx on the directory ``path`` and, with ``inherit``, on everything
    created in it later (its default ACL).

    Opened with ``O_NOFOLLOW``: a symlink put in its place is refused, never followed.
    Raises ``OSError`` (e.g. ``EOPNOTSUPP`` on a filesystem without ACLs).
    """
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        grant_fd(fd, uids, inherit=inherit)
    finally:
        os.close(fd)


def grant_fd(fd: int, uids: list[int], *, inherit: bool = True) -> None:
    """``grant`` on a directory already open (reached without following links)."""
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    os.setxattr(fd, ACCESS, _encode(_with_users(_read(fd, ACCESS, mode), uids)))
    if inherit:
        os.setxattr(fd, DEFAULT, _encode(_with_users(_read(fd, DEFAULT, mode), uids)))


def grant_file(path: str, uids: list[int]) -> None:
    """Give ``uids`` read-write access to the regular file ``path`` (never execute).

    Opened with ``O_NOFOLLOW`` and checked to be a regular file: a symlink or a FIFO put
    in its place is refused. Raises ``OSError``.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        grant_file_fd(fd, uids, path)
    finally:
        os.close(fd)


def grant_file_fd(fd: int, uids: list[int], path: str = "") -> None:
    """``grant_file`` on a file already open (reached without following links)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", path)
    mode = stat.S_IMODE(st.st_mode)
    os.setxattr(fd, ACCESS, _encode(_with_users(_read(fd, ACCESS, mode), uids, 6)))


def users(path: str, *, default: bool = False) -> list[int]:
    """The named users of ``path``'s access (or default) ACL."""
    try:
        entries = _decode(os.getxattr(path, DEFAULT if default else ACCESS))
    except OSError:
        return []
    return sorted(ident for tag, ident in entries if tag == USER)


def may_search(path: str, uid: int, gid: int) -> bool:
    """Whether ``uid``, with group ``gid`` alone (as a jail runs it), may search the
    directory ``path``: its access ACL applied as the kernel applies it (named entries
    through the mask), or its mode bits. Its owner may: it could ``chmod`` it. Unknown (it
    cannot be read) counts as yes."""
    try:
        st = os.stat(path)
        if st.st_uid == uid:
            return True
        try:
            entries = _decode(os.getxattr(path, ACCESS))
        except OSError as exc:
            if exc.errno not in (errno.ENODATA, errno.EOPNOTSUPP):
                raise
            entries = _from_mode(st.st_mode)
    except (OSError, ValueError, struct.error):
        return True
    mask = entries.get((MASK, _NONE), 7)
    named = entries.get((USER, uid))
    if named is not None:
        return bool(named & mask & 1)
    groups = [
        p & mask  # a minimal ACL (the mode bits) has no mask: 7
        for (tag, ident), p in entries.items()
        if (tag == GROUP_OBJ and st.st_gid == gid) or (tag == GROUP and ident == gid)
    ]
    if groups:
        return any(p & 1 for p in groups)
    return bool(entries.get((OTHER, _NONE), st.st_mode & 7) & 1)


__all__ = ["grant", "grant_file", "may_search", "users"]
