"""A bubblewrap jail for host-side helpers that handle what the sandbox wrote.

Some work must happen outside the agent's sandbox but on its behalf: pip fetching the
packages its code asked for, an upstream MCP server reading the files it wrote. Run as
root on the host, either is a way out (a build backend, a symlink swapped between a check
and a read). A jail is the same recipe as the sandbox, for one command:

- a dedicated unprivileged uid (:mod:`.uids`) when the host runs as root (``setpriv``,
  no new privileges, empty capability sets), never the sandbox's own uid;
- a new root built from read-only pieces (``/usr``, the few files of ``/etc`` the command
  needs) plus exactly the host paths it is given, each at the same absolute path; every
  bind is ``nosuid,nodev`` (bubblewrap's default), ``/tmp`` a private tmpfs;
- every namespace new, the network too unless ``network=True``; the seccomp filter of the
  sandbox (its network variant when the network is shared).

bubblewrap resolves its bind sources as the jail's uid, so a source that uid cannot reach
(a venv under ``/root``) is first bound by root onto a reachable mount point in a private
mount namespace that dies with the jail, then mounted at its own path inside.

A mount may be held by an ``O_PATH`` descriptor (:mod:`.views` walks a server's paths to
one): bubblewrap 0.8 mounts it with ``--bind-fd`` (it names the descriptor by where its
inode is now, as the jail's uid, and stops if the mount shows another inode); one that uid
cannot reach is bound by root from ``/proc/<codemode>/fd/N`` and checked the same way. A
name swapped after the walk changes nothing; the jailed command inherits no descriptor.

The seccomp program reaches bubblewrap as an fd whose number is chosen among those the
command is not given (``keep_fds``), never a fixed one: a fixed number would overwrite
whatever the caller passed with that number.
"""

from __future__ import annotations

import atexit
import fcntl
import functools
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import SandboxUnavailable
from ..execution import seccomp as seccomp_mod
from ..execution.bwrap import setpriv_args, system_root_args
from ..execution.hostchecks import can_private_mount, find_program, traversable
from ..execution.spawn import above_stdio

# Root only, in a private mount namespace: binds each SRC onto DST and, where a DEV:INO is
# given (SRC is then /proc/<codemode>/fd/N, which mount(8) resolves to the inode's name as it
# binds), checks that the bind shows that very inode (a name swapped in between stops the
# jail), then execs the rest.
BINDER = (
    'while [ "$1" != "--" ]; do mount --bind "$1" "$2" || exit 126; '
    'if [ -n "$3" ] && [ "$(stat -c %d:%i "$2")" != "$3" ]; then '
    'echo "codemode: $1 changed before it was mounted" >&2; exit 125; fi; shift 3; done; '
    'shift; exec "$@"'
)
# Opens FILE read-only on fd N (chosen by the host, 3-9: what sh can name), then execs the
# rest. For commands another library spawns (an MCP client's stdio), which take no fds.
WITH_FD = (
    'n="$1"; f="$2"; shift 2; case "$n" in [3-9]) ;; *) exit 124;; esac; '
    'eval "exec \\"\\$@\\" $n<\\"\\$f\\""'
)
# What name resolution and TLS need when the network is shared.
NET_ETC = (
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ld.so.cache",
)
BASE_ETC = ("/etc/ld.so.cache", "/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates")

_rundir: str | None = None
_lock = threading.Lock()  # sandbox workers are started on several threads


def rundir() -> str:
    """A root-only directory (mode 0711) for BPF files, mount points and scratch dirs."""
    global _rundir
    with _lock:
        if _rundir is None or not os.path.isdir(_rundir):
            _rundir = tempfile.mkdtemp(prefix="codemode-sandbox-")
            os.chmod(_rundir, 0o711)
            atexit.register(shutil.rmtree, _rundir, True)
        return _rundir


def empty_file() -> str:
    """An empty read-only regular file, bound over the files a jail hides (``/dev/null``
    would be refused on the ``nodev`` binds rather than read empty)."""
    path = os.path.join(rundir(), "empty")
    if not os.path.isfile(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o444)
        os.close(fd)
    return path


@functools.cache
def bpf_path(network: bool = False, *, fd_passing: bool = True) -> str:
    """The BPF file of a variant; ``fd_passing=False``: the sandbox's own (no ``sendmsg``)."""
    return seccomp_mod.write_bpf(rundir(), network=network, fd_passing=fd_passing)


def open_bpf(path: str) -> int:
    """The BPF program as an fd to pass to bwrap by its number (never a fixed one)."""
    return above_stdio(os.open(path, os.O_RDONLY | os.O_CLOEXEC))


def seccomp_fd_number(keep_fds: Sequence[int] = ()) -> int:
    """The fd number for the BPF program: the lowest of 3-9 (what sh can name) that is
    none of the fds the command is given."""
    for n in range(3, 10):
        if n not in keep_fds:
            return n
    raise ValueError("a jailed command given fds 3-9 leaves no number sh can open for seccomp")


@dataclass(frozen=True)
class Mount:
    """A host path shown inside the jail at ``dst`` (default: the same path)."""

    src: str
    dst: str = ""
    writable: bool = False
    fd: int | None = field(default=None, compare=False)
    """An ``O_PATH`` descriptor of the source (:func:`~.views.reach`): mounted by it, so
    what the name leads to after it was opened does not count. The caller keeps it open
    until :func:`build` returned, and closes it then (the launch holds copies)."""

    @property
    def target(self) -> str:
        return self.dst or self.src


@dataclass
class JailSpec:
    """What one jailed command may see and do."""

    mounts: Sequence[Mount] = ()
    uid: int | None = None
    """Switch to this uid/gid first (the host must be root); None keeps the caller's."""
    gid: int | None = None
    network: bool = False
    seccomp: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = "/"
    empty_dirs: Sequence[str] = ()
    """Directories created empty (and read-only, like the rest of the root)."""
    etc: Sequence[str] = ()
    """Extra paths of the host's /etc to show read-only."""
    tmp_size_mb: int | None = 64
    hidden: Sequence[str] = ()
    """Directories inside the mounts covered by an empty tmpfs (after every mount)."""
    hidden_files: Sequence[str] = ()
    """Files inside the mounts covered by an empty read-only file (``empty_file``)."""
    reshown: Sequence[Mount] = ()
    """Mounts made after ``hidden``: parts of a hidden path shown again."""
    stand_ins: Sequence[str] = ()
    """Directories that stand for host ones the command is not shown (where it starts):
    empty and read-only, but for the mounts below them. None may lie below a mount."""


@dataclass
class Launch:
    argv: list[str]
    mount_points: str | None = None
    pass_fds: list[int] = field(default_factory=list)
    """Descriptors the process must be given (``pass_fds``): bwrap's mounts' sources."""
    kept: list[int] = field(default_factory=list)
    """Descriptors root's binds read from this process (``/proc/<pid>/fd``): never passed
    on, since the jailed command would inherit them (``openat(fd, "..")`` leaves any jail)."""

    def cleanup(self) -> None:
        for fd in (*self.pass_fds, *self.kept):
            os.close(fd)
        self.pass_fds, self.kept = [], []
        if self.mount_points:
            shutil.rmtree(self.mount_points, ignore_errors=True)
            self.mount_points = None


@dataclass
class PrivateBinds:
    """Host paths a jail's uid cannot reach, bound by root onto mount points it can reach
    (in a private mount namespace that dies with the process): one plan for the sandbox's
    workers and for jailed helpers."""

    sources: list[str]
    """Each path as given, or the mount point that stands for it."""
    pairs: list[tuple[str, str, str]] = field(default_factory=list)
    """Source, mount point, and the ``dev:ino`` the bind must show (or "")."""
    mount_points: str | None = None
    """The directory of the mount points, to remove once the process has exited."""

    def argv(self, name: str) -> list[str]:
        """The launch line's prefix that makes the binds (none when nothing is hidden)."""
        if not self.pairs:
            return []
        unshare = find_program("unshare") or "unshare"
        line = [unshare, "--mount", "--propagation", "private", "/bin/sh", "-c", BINDER, name]
        return [*line, *(p for pair in self.pairs for p in pair), "--"]


def private_binds(
    paths: Sequence[str],
    reachable: Callable[[str], bool],
    *,
    prefix: str = "jail-",
    expect: Sequence[str] = (),
) -> PrivateBinds:
    """Plan the binds of the ``paths`` that ``reachable`` says the jail's uid cannot reach
    (left as they are where no private mount namespace can be made: the caller refuses).
    ``expect``: for each path, the ``dev:ino`` its bind must show, or ""."""
    plan = PrivateBinds(list(paths))
    if not can_private_mount():
        return plan
    for i, src in enumerate(paths):
        if reachable(src):
            continue
        if plan.mount_points is None:
            plan.mount_points = tempfile.mkdtemp(prefix=prefix, dir=rundir())
            os.chmod(plan.mount_points, 0o711)
        point = os.path.join(plan.mount_points, str(len(plan.pairs)))
        if os.path.isdir(src):
            os.mkdir(point)
        else:
            open(point, "w").close()
        plan.pairs.append((src, point, expect[i] if i < len(expect) else ""))
        plan.sources[i] = point
    return plan


def available() -> str | None:
    """Why a jail cannot start here, or None."""
    if find_program("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    if os.geteuid() == 0 and find_program("setpriv") is None:
        return "setpriv is not installed (apt-get install util-linux)"
    return None


def build(spec: JailSpec, command: Sequence[str], *, keep_fds: Sequence[int] = ()) -> Launch:
    """The launch line of ``command`` in the jail ``spec`` describes.

    ``keep_fds``: the fds the caller passes to the command; the BPF program's fd gets a
    number none of them has.
    """
    why = available()
    if why is not None:
        raise SandboxUnavailable(f"cannot isolate a host-side helper: {why}")
    switch = spec.uid is not None and os.geteuid() == 0
    uid = spec.uid if switch and spec.uid is not None else os.geteuid()
    gid = spec.gid if switch and spec.gid is not None else os.getegid()
    launch = Launch([])
    try:
        binds, sources = _sources(spec, uid, gid, launch)
    except BaseException:
        launch.cleanup()  # the descriptors copied so far
        raise
    launch.mount_points = binds.mount_points
    argv = binds.argv("codemode-jail")
    fd = None
    if spec.seccomp and seccomp_mod.available()[0]:
        fd = seccomp_fd_number(keep_fds)
        argv += ["/bin/sh", "-c", WITH_FD, "codemode-jail", str(fd), bpf_path(spec.network)]
    if switch:
        argv += setpriv_args(find_program("setpriv") or "setpriv", uid, gid)
    argv += _bwrap(spec, sources, fd)
    argv += list(command)
    launch.argv = argv
    return launch


def _sources(
    spec: JailSpec, uid: int, gid: int, launch: Launch
) -> tuple[PrivateBinds, list[tuple[Mount, str | int]]]:
    """Each mount's source: a path, the mount point root binds it onto, or a descriptor
    bwrap mounts (copied into ``launch.pass_fds``; those root binds into ``launch.kept``)."""
    held: list[tuple[Mount, str, str]] = []  # a mount, its source, its dev:ino
    names: dict[str, str] = {}  # a descriptor's name in /proc -> where its inode is now
    dups: dict[str, int] = {}
    for m in (*spec.mounts, *spec.reshown):
        if m.fd is None:
            src = os.path.realpath(m.src)
            if os.path.exists(src):
                held.append((m, src, ""))
            continue
        name = os.readlink(f"/proc/self/fd/{m.fd}")
        if not name.startswith("/") or name.endswith(" (deleted)"):
            continue
        dup = fcntl.fcntl(m.fd, fcntl.F_DUPFD_CLOEXEC, 10)  # above what sh can name
        launch.kept.append(dup)
        st = os.fstat(dup)
        # root's bind (in the jail's private namespace) reads this process's descriptor:
        # mount(8) resolves it when it binds, the check after it stops any swap since
        src = f"/proc/{os.getpid()}/fd/{dup}"
        names[src], dups[src] = name, dup
        held.append((m, src, f"{st.st_dev}:{st.st_ino}"))

    def reachable(src: str) -> bool:
        try:
            return traversable(names.get(src, src), uid, gid, read_last=False)
        except OSError:  # renamed meanwhile: root's bind finds it wherever it is
            return False

    binds = private_binds([src for _, src, _ in held], reachable, expect=[ino for *_, ino in held])
    sources: list[tuple[Mount, str | int]] = []
    for (m, src, _), bound in zip(held, binds.sources, strict=True):
        if src in dups and bound == src:  # bwrap mounts it by its descriptor
            launch.kept.remove(dups[src])
            launch.pass_fds.append(dups[src])
            sources.append((m, dups[src]))
        else:
            sources.append((m, bound))
    return binds, sources


def _bwrap(
    spec: JailSpec, sources: list[tuple[Mount, str | int]], seccomp_fd: int | None
) -> list[str]:
    a = [find_program("bwrap") or "bwrap", "--unshare-all"]
    if spec.network:
        a.append("--share-net")
    a += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
    if seccomp_fd is not None:
        a += ["--seccomp", str(seccomp_fd)]
    else:
        a.append("--disable-userns")
    etc = tuple(dict.fromkeys((*BASE_ETC, *(NET_ETC if spec.network else ()), *spec.etc)))
    a += system_root_args(etc)
    size = ["--size", str(spec.tmp_size_mb << 20)] if spec.tmp_size_mb else []
    a += ["--proc", "/proc", "--dev", "/dev", *size, "--tmpfs", "/tmp"]
    for path in spec.stand_ins:  # before the mounts below it; read-only once they are made
        a += ["--perms", "0555", "--tmpfs", path]
    later = {id(m) for m in spec.reshown}
    for m, src in sources:
        if id(m) not in later:
            a += _bind(m, src)
    for path in spec.hidden:
        a += ["--perms", "0555", "--tmpfs", path]
    for path in spec.hidden_files:
        a += ["--ro-bind", empty_file(), path]
    for m, src in sources:
        if id(m) in later:
            a += _bind(m, src)
    for d in spec.empty_dirs:
        a += ["--dir", d]
    for path in spec.stand_ins:
        a += ["--remount-ro", path]
    a += ["--remount-ro", "/", "--chdir", spec.cwd]
    for key, value in spec.env.items():
        a += ["--setenv", key, value]
    return a


def _bind(m: Mount, src: str | int) -> list[str]:
    """A path, or a descriptor (bwrap 0.8 names it by where it is now as the jail's uid,
    mounts that, and stops if the mount does not show the descriptor's inode)."""
    if isinstance(src, int):
        return ["--bind-fd" if m.writable else "--ro-bind-fd", str(src), m.target]
    return ["--bind" if m.writable else "--ro-bind", src, m.target]


__all__ = [
    "BINDER",
    "JailSpec",
    "Launch",
    "Mount",
    "PrivateBinds",
    "available",
    "bpf_path",
    "build",
    "open_bpf",
    "private_binds",
    "rundir",
    "seccomp_fd_number",
]
