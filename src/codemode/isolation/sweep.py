"""One pass over a sandbox-writable tree: strip setuid/setgid bits, count bytes and files.

The sandbox's seccomp filter refuses every mode with ``S_ISUID``/``S_ISGID``; this pass is
the second net, run on the host (often as root) after each run. Root walking a tree that
untrusted code writes *while* it walks must never be led elsewhere by a swapped path:

- every directory is opened relative to its parent's descriptor with ``O_NOFOLLOW``, and
  listed through that descriptor, so a directory replaced by a symlink is not entered;
- a file's bits are changed through an ``O_PATH | O_NOFOLLOW`` descriptor after ``fstat``
  confirmed it is a regular file, so a name swapped for a symlink between the listing and
  the change is skipped, never followed;
- nothing is opened for reading (FIFOs and devices cannot block or act), other
  filesystems mounted inside are not entered.

The cost is bounded: at most ``max_entries`` entries are visited and ``max_depth``
directory levels held open; a tree larger than that is reported ``complete=False`` (a
workspace with more files than its quota is over quota anyway).
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass

SUID_BITS = stat.S_ISUID | stat.S_ISGID
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Usage:
    """What one pass found: disk bytes and inodes used, bits stripped."""

    bytes: int
    files: int
    stripped: tuple[str, ...] = ()
    complete: bool = True
    held: int = 0
    """Of ``bytes``, those in deleted files the sandbox's processes still hold (see
    :func:`held_bytes`)."""


def sweep(root: str, *, max_entries: int = 1_000_000, max_depth: int = 256) -> Usage:
    """Strip setuid/setgid bits of every regular file under ``root``; count its usage.

    Bytes are allocated blocks (``du``), so a sparse file costs what it occupies; files
    count every inode once (directories included, hard links once).
    """
    try:
        top = os.open(root, _DIR_FLAGS)
    except OSError:
        return Usage(0, 0)
    walker = _Walker(max_entries, max_depth, os.fstat(top).st_dev)
    try:
        walker.walk(top, "", 0)
    finally:
        os.close(top)
    return Usage(walker.bytes, walker.files, tuple(walker.stripped), walker.complete)


class _Walker:
    def __init__(self, max_entries: int, max_depth: int, dev: int) -> None:
        self.left = max_entries
        self.max_depth = max_depth
        self.dev = dev
        self.bytes = 0
        self.files = 0
        self.stripped: list[str] = []
        self.complete = True
        self._seen: set[int] = set()

    def walk(self, dfd: int, rel: str, depth: int) -> None:
        subdirs: list[str] = []
        try:
            entries = list(os.scandir(dfd))
        except OSError:
            return
        for entry in entries:
            if self.left <= 0:
                self.complete = False
                return
            self.left -= 1
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # gone already
            if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                if st.st_ino in self._seen:
                    continue
                self._seen.add(st.st_ino)
            self.files += 1
            self.bytes += st.st_blocks * 512
            if stat.S_ISDIR(st.st_mode):
                subdirs.append(entry.name)
            elif stat.S_ISREG(st.st_mode) and st.st_mode & SUID_BITS:
                self._strip(dfd, entry.name, f"{rel}{entry.name}")
        for name in subdirs:
            if depth + 1 >= self.max_depth:
                self.complete = False
                continue
            try:
                sub = os.open(name, _DIR_FLAGS, dir_fd=dfd)
            except OSError:
                continue  # swapped for a symlink or removed: not followed
            try:
                if os.fstat(sub).st_dev == self.dev:
                    self.walk(sub, f"{rel}{name}/", depth + 1)
            finally:
                os.close(sub)

    def _strip(self, dfd: int, name: str, rel: str) -> None:
        try:
            fd = os.open(name, _PATH_FLAGS, dir_fd=dfd)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_mode & SUID_BITS:
                # an O_PATH descriptor cannot be fchmod-ed; its /proc link names the very
                # inode just checked, never a path that could be swapped
                with contextlib.suppress(OSError):
                    os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(st.st_mode) & ~SUID_BITS)
                    self.stripped.append(rel)
        finally:
            os.close(fd)


def held_bytes(pid: int, dev: int, uid: int) -> int:
    """Disk bytes of deleted files that ``pid`` or a descendant still holds open or mapped.

    An unlinked file keeps its blocks until its last descriptor or mapping goes, and no
    walk of the directory can see it: sandboxed code could open, unlink and write file
    after file past any quota. Only regular files on ``dev`` (the workspace's filesystem),
    owned by ``uid`` (the sandbox's) and with no name left count. Nothing is opened: each
    ``/proc`` link is only ``stat``-ed. ``map_files`` needs root; a non-root host counts
    open descriptors only.
    """
    seen: set[int] = set()
    total = 0
    for proc in descendants(pid):
        for where in (f"/proc/{proc}/fd", f"/proc/{proc}/map_files"):
            try:
                names = os.listdir(where)
            except OSError:
                continue
            for name in names:
                try:
                    st = os.stat(f"{where}/{name}")
                except OSError:
                    continue
                if (
                    st.st_nlink == 0
                    and st.st_dev == dev
                    and st.st_uid == uid
                    and stat.S_ISREG(st.st_mode)
                    and st.st_ino not in seen
                ):
                    seen.add(st.st_ino)
                    total += st.st_blocks * 512
    return total


def cpu_ticks(pid: int) -> int:
    """CPU time (clock ticks, user + system) ``pid`` and its descendants have used: writing
    costs CPU, so a tree whose count did not move wrote nothing meanwhile."""
    total = 0
    for proc in descendants(pid):
        try:
            with open(f"/proc/{proc}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
        except (OSError, IndexError, ValueError):
            continue
    return total


def written(pid: int) -> int | None:
    """Bytes ``pid`` and its descendants have written: ``write()`` calls (``wchar``) plus
    pages they dirtied in files (``write_bytes``, which sees an ``mmap`` writer on a disk),
    from ``/proc/<pid>/io``; None when no process's count can be read (then CPU time is
    the only sign of activity). Unlike CPU time, a process that only computes adds
    nothing, so a busy session sharing a workspace is not taken for its writer."""
    total, read = 0, False
    for proc in descendants(pid):
        try:
            with open(f"/proc/{proc}/io", "rb") as fh:
                fields = dict(line.split(b":", 1) for line in fh.read().splitlines())
            total += int(fields[b"wchar"]) + int(fields[b"write_bytes"])
            read = True
        except (OSError, KeyError, ValueError):
            continue
    return total if read else None


def tree_memory(pid: int) -> tuple[int, int | None]:
    """Memory ``pid`` and its descendants use together, and which of them uses the most.

    Proportional set size (``/proc/<pid>/smaps_rollup``): a page shared by forked
    processes counts once in all, where adding up resident sizes counted it in each
    child. Where ``smaps_rollup`` cannot be read, resident minus file-backed pages
    (``statm``). For hosts without a memory cgroup, whose ``RLIMIT_AS`` bounds each process
    alone: the host holds the whole tree to the session's limit (:mod:`..execution.guard`).
    """
    total, biggest, most = 0, None, -1
    page = os.sysconf("SC_PAGE_SIZE")
    for proc in descendants(pid):
        used = -1
        try:
            with open(f"/proc/{proc}/smaps_rollup", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Pss:"):
                        used = int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError, IndexError):
            pass
        if used < 0:
            try:
                with open(f"/proc/{proc}/statm", "rb") as fh:
                    fields = fh.read().split()
                used = max(0, int(fields[1]) - int(fields[2])) * page
            except (OSError, ValueError, IndexError):
                continue
        total += used
        if used > most:
            biggest, most = proc, used
    return total, biggest


def descendants(pid: int, limit: int = 100_000) -> list[int]:
    """``pid`` and every process below it (a process re-parented to the sandbox's pid-1
    stays below it), from each thread's ``children`` list."""
    found, todo = [pid], [pid]
    while todo and len(found) < limit:
        proc = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{proc}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{proc}/task/{tid}/children", "rb") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except (OSError, ValueError):
                continue
            found += kids
            todo += kids
    return found


__all__ = [
    "SUID_BITS",
    "Usage",
    "cpu_ticks",
    "descendants",
    "held_bytes",
    "sweep",
    "tree_memory",
    "written",
]
