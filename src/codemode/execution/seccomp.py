"""The seccomp filter loaded into every sandboxed worker (``bwrap --seccomp FD``).

Namespaces already cut the worker off from the host's network, mounts and processes; the
filter removes the kernel interfaces that are the usual ways *out* of a namespace, or
that only a debugger or an administrator needs. Denied calls fail with ``EPERM`` (the
code sees an ordinary ``PermissionError``) rather than killing the worker, so an agent
gets an error it can read.

Socket policy: ``socket``/``socketpair`` are allowed for ``AF_UNIX`` only. asyncio's
event loop (top-level ``await``) needs a unix socketpair, and with the mount and network
namespaces unshared no host unix socket is reachable: host socket files are not mounted
and abstract sockets belong to the (empty) network namespace. Every other family
(``AF_INET``, ``AF_INET6``, ``AF_NETLINK``, ``AF_PACKET``, ``AF_VSOCK``...) gets
``EAFNOSUPPORT``.

``clone3`` answers ``ENOSYS`` (its flags sit behind a pointer the filter cannot read), so
the C library falls back to ``clone``, whose namespace flags are checked. ``openat2`` answers
``ENOSYS`` for the same reason (its mode sits in a struct): the C library and Python fall
back to ``openat``.

Setuid and setgid bits: the workspace is a host directory, and a setuid file the sandbox
leaves there is a setuid file on the host. Every call that sets a mode (``chmod``,
``fchmod``, ``fchmodat``, ``fchmodat2``, ``open``/``openat``/``creat`` with ``O_CREAT``,
``mknod``, ``mknodat``) fails with ``EPERM`` when the mode carries ``S_ISUID`` or
``S_ISGID``. The host strips such bits after each run as a second net
(:mod:`codemode.isolation.sweep`).

Descriptors passed over a unix socket (``SCM_RIGHTS``): the sandbox's own filter
(``fd_passing=False``) answers ``sendmsg`` and ``sendmmsg`` with ``EPERM``, the only calls
that carry them (their control data sits behind a pointer the filter cannot read, so both
go). A descriptor in flight belongs to no process: a deleted workspace file sent to a
socket and closed kept its blocks on the host's disk, invisible to the quota's count of
open deleted files (``/proc``), up to ``open_files`` of them at ``file_size_mb`` each, and
so did the descriptors themselves to ``open_files`` per process. ``send``, ``sendto`` and
``write`` still work on unix sockets (asyncio's event loop, ``multiprocessing``'s default
``fork`` context, pipes); what needs the two calls gets a ``PermissionError``:
``socket.send_fds``, ``multiprocessing``'s ``forkserver`` context (the default from
Python 3.14: use ``multiprocessing.get_context("fork")``), asyncio socket transports
from Python 3.12 once their buffer fills. Jails keep them (a server's ``child_process`` IPC, the C
library's DNS over ``sendmmsg``).

``network=True`` builds the variant for jails that need the network (a package download):
every other rule stays, internet sockets are allowed.
"""

from __future__ import annotations

import errno
import functools
import os
import socket
import stat
import tempfile
from typing import Any

# Calls that fail with EPERM whatever their arguments.
DENIED_SYSCALLS: tuple[str, ...] = (
    # debugging other processes / reading their memory
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    # mounts and namespaces
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    # kernel extension points with a long CVE history
    "bpf",
    "userfaultfd",
    "perf_event_open",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "keyctl",
    "add_key",
    "request_key",
    "fanotify_init",
    "name_to_handle_at",
    "open_by_handle_at",
    # administration
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    "syslog",
    "iopl",
    "ioperm",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    "vhangup",
    "uselib",
    "lookup_dcookie",
    "nfsservctl",
)

# clone(2) flags that create namespaces (CLONE_NEWNS .. CLONE_NEWNET, CLONE_NEWCGROUP,
# CLONE_NEWTIME).
_CLONE_NS_FLAGS = (
    0x00020000  # NEWNS
    | 0x02000000  # NEWCGROUP
    | 0x04000000  # NEWUTS
    | 0x08000000  # NEWIPC
    | 0x10000000  # NEWUSER
    | 0x20000000  # NEWPID
    | 0x40000000  # NEWNET
    | 0x00000080  # NEWTIME
)


def _seccomp() -> Any:
    """Import pyseccomp lazily: it loads libseccomp through ctypes."""
    import pyseccomp

    return pyseccomp


def available() -> tuple[bool, str]:
    """Whether a filter can be built here, and if not, why."""
    try:
        _seccomp()
    except (ImportError, OSError) as exc:
        return False, f"pyseccomp/libseccomp not loadable: {exc}"
    return True, "pyseccomp over libseccomp"


# (call, index of its mode argument): every call that can give a file a mode.
MODE_ARGS: tuple[tuple[str, int], ...] = (
    ("chmod", 1),
    ("fchmod", 1),
    ("fchmodat", 2),
    ("fchmodat2", 2),
    ("open", 2),
    ("openat", 3),
    ("creat", 1),
    ("mknod", 1),
    ("mknodat", 2),
)
# Calls whose arguments sit behind a pointer: refused as "not implemented", so callers
# fall back to the plain variant the filter can check.
NOSYS_SYSCALLS: tuple[str, ...] = ("clone3", "openat2")


FD_PASSING_SYSCALLS = ("sendmsg", "sendmmsg")
"""Denied to the sandbox itself (``fd_passing=False``): see the module docstring."""


def build_filter(*, network: bool = False, fd_passing: bool = True) -> Any:
    """The ``pyseccomp.SyscallFilter`` described in the module docstring."""
    sc = _seccomp()
    f = sc.SyscallFilter(defaction=sc.ALLOW)
    eperm = sc.ERRNO(errno.EPERM)
    for name in (*DENIED_SYSCALLS, *(() if fd_passing else FD_PASSING_SYSCALLS)):
        try:
            f.add_rule(eperm, name)
        except (OSError, ValueError, RuntimeError):
            continue  # a call this architecture or libseccomp does not know
    if not network:
        afnosupport = sc.ERRNO(errno.EAFNOSUPPORT)
        for call in ("socket", "socketpair"):
            f.add_rule(afnosupport, call, sc.Arg(0, sc.NE, socket.AF_UNIX))
    for flag in _split_flags(_CLONE_NS_FLAGS):
        f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    for name, index in MODE_ARGS:
        for bit in (stat.S_ISUID, stat.S_ISGID):
            try:
                f.add_rule(eperm, name, sc.Arg(index, sc.MASKED_EQ, bit, bit))
            except (OSError, ValueError, RuntimeError):
                break  # a call this architecture does not have (e.g. open on arm64)
    for name in NOSYS_SYSCALLS:
        try:
            f.add_rule(sc.ERRNO(errno.ENOSYS), name)
        except (OSError, ValueError, RuntimeError):
            continue
    return f


def _split_flags(mask: int) -> list[int]:
    return [1 << bit for bit in range(mask.bit_length()) if mask & (1 << bit)]


@functools.cache
def bpf_program(*, network: bool = False, fd_passing: bool = True) -> bytes:
    """The compiled BPF program, built once per process (and variant)."""
    f = build_filter(network=network, fd_passing=fd_passing)
    fd = os.memfd_create("codemode-seccomp", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "wb") as sink:
            f.export_bpf(sink)
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_bpf(directory: str, *, network: bool = False, fd_passing: bool = True) -> str:
    """Write the program into ``directory`` (atomically) and return the file's path.

    The launcher opens it as ``bwrap --seccomp FD`` for each worker, so no descriptor
    has to outlive a spawn.
    """
    program = bpf_program(network=network, fd_passing=fd_passing)
    fd, tmp = tempfile.mkstemp(prefix=".seccomp-", dir=directory)
    try:
        os.write(fd, program)
    finally:
        os.close(fd)
    name = "seccomp-net" if network else "seccomp"
    path = os.path.join(directory, f"{name}{'' if fd_passing else '-nofd'}.bpf")
    os.replace(tmp, path)
    os.chmod(path, 0o444)
    return path


__all__ = [
    "DENIED_SYSCALLS",
    "FD_PASSING_SYSCALLS",
    "MODE_ARGS",
    "NOSYS_SYSCALLS",
    "available",
    "bpf_program",
    "build_filter",
    "write_bpf",
]
