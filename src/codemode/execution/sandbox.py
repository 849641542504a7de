"""``SandboxExecutor``: the subprocess worker, inside bubblewrap, as an unprivileged uid.

The worker is the same ``codemode_worker`` process the subprocess executor starts; only
its launch line changes. One launch is::

    /bin/sh -c 'join cgroups; exec "$@"'               (host user: root or you)
      [unshare --mount sh -c 'mount --bind ...']         (root, for dirs under e.g. /root)
      setpriv --reuid 65534 ...                          (only when the host user is root)
        bwrap --unshare-all --cap-drop ALL --seccomp N ...   (new user/pid/net/ipc/uts/cgroup ns)
          python -I -S -c <bootstrap> <config>           (rlimits, then codemode_worker.main)

The seccomp program is an fd the host opened and passed (``N`` is whatever number it got:
no number is fixed, so no pipe of the worker can be overwritten by it).

Why each layer:

- **setpriv**: bwrap started by root keeps every capability inside the sandbox (code could
  remount ``/`` read-write). Root drops to ``uid``/``gid`` (65534 by default) first, with
  ``no_new_privs`` and an empty bounding set; a non-root host user is already unprivileged.
- **bwrap**: a new root built from read-only pieces only: ``/usr`` (and the ``/lib``,
  ``/bin`` links), ``/etc/ld.so.cache`` and TLS roots, the interpreter's prefix when it
  lives outside ``/usr``, the worker package at ``/opt/codemode``, the deps directory at
  ``/opt/codemode-deps``. A private tmpfs on ``/tmp``, bwrap's own ``/proc`` (new pid
  namespace) and minimal ``/dev``. The session's workspace is the only writable host
  directory, at ``/workspace``. No host ``/home``, ``/root``, ``/proc``, ``/sys`` or
  ``/run``: a symlink in the workspace pointing at ``/etc/shadow`` resolves inside the
  sandbox, where that file does not exist.
- **private binds**: bwrap resolves bind sources as the sandbox uid, so a workspace under
  a directory it cannot search (``~/.codemode`` of root) is first bind-mounted by root onto
  a reachable mount point, in a private mount namespace that dies with the worker.
- **seccomp** (:mod:`.seccomp`), **limits** (:mod:`.limits`): cgroups joined by the shell
  line before exec, rlimits applied by the bootstrap before any agent code runs.

When bubblewrap or user namespaces are missing the executor refuses to start
(:class:`~codemode.errors.SandboxUnavailable`, with the fix), unless built with
``allow_weaker=True``: then it warns and runs what it can.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import tempfile
import threading
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError, SandboxUnavailable
from ..isolation.jail import WITH_FD, bpf_path, open_bpf, private_binds, rundir
from .bwrap import (
    DEPS_MOUNT,
    SANDBOX_ENV,
    SANDBOX_GID,
    SANDBOX_UID,
    SITE_MOUNT,
    WORKER_MOUNT,
    WORKER_PKG,
    WORKSPACE,
    bwrap_args,
    setpriv_args,
)
from .guard import GuardedWorker, SizeHints, WorkspaceQuota
from .hostchecks import (
    Check,
    can_private_mount,
    find_program,
    sandbox_python,
    traversable,
    userns_check,
    writable_by,
)
from .limits import CgroupSupport, Limits, LimitStatus, WorkerLimits, detect_cgroups, plan
from .sandbox_checks import probe, sandbox_checks
from .spawn import LaunchSpec, describe_exit, off_loop
from .subprocess import BOOTSTRAP, SubprocessExecutor

# Joins the cgroups named before "--", then execs the rest (inherited fds pass through).
_LAUNCHER = 'while [ "$1" != "--" ]; do echo 0 > "$1" || exit 125; shift; done; shift; exec "$@"'
# Applies rlimits (from the config) before the worker, hence before any agent code.
_RLIMITS_BOOT = (
    "import sys,json,resource as r;c=json.loads(sys.argv[1])\n"
    "for n,v in c.pop('rlimits',()):r.setrlimit(getattr(r,n),(v,v))\n"
)


class WeakerSandboxWarning(RuntimeWarning):
    """The sandbox runs without some protection because ``allow_weaker=True`` allowed it."""


@dataclasses.dataclass
class _Launched:
    """A sandboxed launch line, the cleanup to run once its process has exited, the host
    directory at /workspace and the BPF program's fd to pass (None when the line opens it)."""

    argv: list[str]
    cleanup: Callable[[], None]
    workspace: str
    bpf_fd: int | None = None


# -- the executor ------------------------------------------------------------------------


class SandboxExecutor(SubprocessExecutor):
    """Each session's code in its own persistent worker inside bubblewrap.

    ``workspace``: host directory mounted read-write at ``/workspace`` (the worker's cwd);
    None gives every worker a private empty one, removed with the worker.
    ``allow_weaker``: run even when a protection is missing (with a warning) instead of
    raising :class:`SandboxUnavailable`.
    """

    def __init__(
        self,
        *,
        workspace: str | os.PathLike[str] | None = None,
        limits: Limits | None = None,
        memory_limit_mb: int | None = None,
        python: str | None = None,
        bwrap: str | None = None,
        setpriv: str = "setpriv",
        uid: int = SANDBOX_UID,
        gid: int = SANDBOX_GID,
        seccomp: bool = True,
        cgroups: bool = True,
        allow_weaker: bool = False,
        pool_size: int = 2,
        interrupt_grace: float = 1.0,
        max_output: int = 1_000_000,
        env: Mapping[str, str] | None = None,
        deps_dir: str | os.PathLike[str] | None = None,
        site_packages: bool = False,
        start_timeout: float = 15.0,
        max_frame_mb: int = 256,
        max_queued_mb: int = 256,
        max_calls: int = 256,
    ) -> None:
        # CODEMODE_BWRAP points at a bubblewrap outside PATH (or at none, to test refusal).
        bwrap = bwrap or os.environ.get("CODEMODE_BWRAP") or "bwrap"
        self.limits = limits or Limits()
        if memory_limit_mb is not None:  # the SubprocessExecutor spelling, for option parity
            self.limits = dataclasses.replace(self.limits, memory_mb=memory_limit_mb)
        super().__init__(
            python=python,
            memory_limit_mb=self.limits.memory_mb,
            pool_size=pool_size,
            interrupt_grace=interrupt_grace,
            max_output=max_output,
            cwd=None,
            env=env,
            deps_dir=deps_dir,
            site_packages=site_packages,
            start_timeout=start_timeout,
            max_frame_mb=max_frame_mb,
            max_queued_mb=max_queued_mb,
            max_calls=max_calls,
        )
        self.requested_python = python
        self.workspace = os.path.realpath(workspace) if workspace is not None else None
        self.bwrap = bwrap
        self.setpriv = setpriv
        self.uid, self.gid = (uid, gid) if os.geteuid() == 0 else (os.geteuid(), os.getegid())
        self.use_seccomp = seccomp
        self.use_cgroups = cgroups
        self.allow_weaker = allow_weaker
        self._prepared: dict[str, Any] | None = None
        self._prepare_lock = threading.Lock()
        self._size_hints = SizeHints()
        self.cgroup_dirs: list[str] = []
        """Every cgroup directory made for this executor's workers (each removed at exit)."""

    @classmethod
    def for_workspace(cls, workspace: Any | None = None, **options: Any) -> SandboxExecutor:
        """An executor for a codemode workspace: its files directory and its deps.

        Only the workspace's files directory is mounted, never its root: the root holds
        the server configuration (commands the host runs, tokens in their env), which
        the agent's code must neither read nor rewrite.
        """
        if workspace is not None:
            files = getattr(workspace, "files_dir", None)
            if files is None:
                files = os.path.join(os.fspath(workspace.path), "files")
            os.makedirs(files, exist_ok=True)
            options.setdefault("workspace", files)
            deps = getattr(workspace, "deps_dir", None)
            if deps is not None:
                options.setdefault("deps_dir", deps)
            settings = getattr(workspace, "settings", None)
            if settings is not None and "limits" not in options:
                options["limits"] = Limits(
                    workspace_mb=settings.workspace_quota_mb or None,
                    workspace_files=settings.workspace_quota_files or None,
                )
        options.pop("cwd", None)
        return cls(**options)

    # -- checks ------------------------------------------------------------------------
    def checks(self) -> list[Check]:
        """Every precondition of full isolation, in the order a user should fix them."""
        return sandbox_checks(self)

    def verify(self) -> list[Check]:
        """:meth:`checks`, then (if they pass) start a throwaway sandbox to prove it works.

        Catches what static checks cannot see (an AppArmor profile, a container's own
        seccomp policy refusing user namespaces...).
        """
        out = self.checks()
        if all(c.ok for c in out if c.required):
            try:
                self._prepare()
            except (SandboxUnavailable, ConfigError) as exc:
                out.append(Check("test sandbox", False, str(exc), "run `codemode doctor`"))
            else:
                out.append(Check("test sandbox", True, "started and exited cleanly"))
        return out

    def _prepare(self) -> dict[str, Any]:
        """Resolve programs and paths once; refuse (or warn) when something is missing.

        Blocking (it starts a test sandbox): :meth:`prepare` runs it off the event loop.
        """
        if self._prepared is not None:
            return self._prepared
        with self._prepare_lock:
            if self._prepared is None:
                self._prepared = self._check_and_probe()
            return self._prepared

    def _check_and_probe(self) -> dict[str, Any]:
        failed = [c for c in self.checks() if not c.ok and c.required]
        paths = [c for c in failed if c.name in ("workspace", "deps directory")]
        if paths:  # a configuration mistake: weaker isolation would not fix it
            raise ConfigError("; ".join(f"{c.name}: {c.detail}. Fix: {c.fix}" for c in paths))
        hard = {c.name for c in failed} - {"seccomp"}
        if failed and not self.allow_weaker:
            lines = [f"- {c.name}: {c.detail}. Fix: {c.fix}" for c in failed]
            raise SandboxUnavailable(
                "the sandbox cannot start on this machine:\n"
                + "\n".join(lines)
                + "\nOr pass allow_weaker=True (SandboxExecutor) to run with weaker isolation."
            )
        prep: dict[str, Any] = {"weak": bool(hard), "seccomp": self.use_seccomp}
        if failed:
            names = ", ".join(c.name for c in failed)
            what = (
                "NO isolation: code runs as a plain subprocess with the host user's rights"
                if hard
                else "without " + names
            )
            warnings.warn(
                f"sandbox running {what} (missing: {names})", WeakerSandboxWarning, stacklevel=3
            )
            if "seccomp" in names:
                prep["seccomp"] = False
        if not hard:
            exe, prefix = sandbox_python(self.requested_python, self.uid, self.gid)
            prep.update(
                bwrap=find_program(self.bwrap),
                setpriv=find_program(self.setpriv),
                python=exe,
                prefix=prefix,
            )
            if prep["seccomp"]:
                prep["bpf"] = bpf_path(fd_passing=False)
            probe(self, prep)
        return prep

    @property
    def weak(self) -> bool:
        """True when ``allow_weaker`` let the executor run without bubblewrap."""
        return bool(self._prepare()["weak"])

    def limit_status(self) -> list[LimitStatus]:
        """How each of this executor's limits is enforced here."""
        return plan(self.limits, self._cgroups())

    def _cgroups(self) -> CgroupSupport:
        if self.use_cgroups:
            return detect_cgroups()
        return CgroupSupport(version=None, why_not="cgroups switched off (cgroups=False)")

    # -- launching ---------------------------------------------------------------------
    def worker_config(self) -> dict[str, Any]:
        config = super().worker_config()
        if self._prepare()["weak"]:
            return config
        config.update(
            root=WORKER_MOUNT,
            paths=[DEPS_MOUNT] if self.deps_dir and os.path.isdir(self.deps_dir) else [],
            tail_paths=[SITE_MOUNT] if self.site_packages else [],
            cwd=WORKSPACE,
            memory_limit_mb=None,  # applied with the other rlimits by the bootstrap
        )
        return config

    def describe_exit(self, returncode: int | None) -> str:
        """bwrap reports a worker killed by signal N as exit status 128 + N."""
        if returncode is not None and 128 < returncode < 128 + 65:
            return describe_exit(-(returncode - 128))
        return describe_exit(returncode)

    def pool_key(self) -> tuple[Any, ...]:
        return (
            *super().pool_key(),
            self.workspace,
            self.limits,
            self.uid,
            self.gid,
            self.bwrap,
            self.setpriv,
            self.use_seccomp,
            self.use_cgroups,
            self.requested_python,
        )

    def launch_spec(self, config: dict[str, Any], *, background: bool = False) -> LaunchSpec:
        prep = self._prepare()
        if prep["weak"]:
            return super().launch_spec(config, background=background)
        site = None
        if self.site_packages:
            import sysconfig

            site = sysconfig.get_paths()["purelib"]

        made: list[WorkerLimits] = []

        def boot_line(limits: WorkerLimits) -> list[str]:
            made.append(limits)
            self.cgroup_dirs += limits.groups.values()
            boot = {**config, "rlimits": limits.rlimits()}
            return [prep["python"], "-I", "-S", "-c", _RLIMITS_BOOT + BOOTSTRAP, json.dumps(boot)]

        launched = self._launch(
            prep, boot_line, worker=True, background=background, deps=self.deps_dir, site=site
        )
        fds = (launched.bpf_fd,) if launched.bpf_fd is not None else ()
        return LaunchSpec(
            argv=launched.argv,
            env={"PATH": "/usr/bin:/bin"},
            cwd="/",
            pass_fds=fds,
            close_after_spawn=fds,
            cleanup=launched.cleanup,
            workspace=launched.workspace,
            cpu_group=made[0] if made and background else None,
        )

    def command_line(
        self, argv: list[str], env: Mapping[str, str] | None = None
    ) -> tuple[list[str], Callable[[], None]]:
        """``argv`` as a one-shot process in this executor's sandbox, without a worker.

        The same launch line as a worker (cgroups, private binds, setpriv, bwrap, seccomp);
        ``prlimit`` applies the rlimits before ``argv`` runs. Used by command-line tools
        defined in the workspace (``codemode.tools.declared``). Returns the command and a
        ``cleanup()`` to call once it has exited. Refuses when the sandbox is unavailable.
        The command is given no fds but stdio, so its launch line opens the seccomp program
        itself, on fd 3 (``WITH_FD``).
        """
        prep = self._prepare()
        if prep["weak"]:
            raise SandboxUnavailable("the sandbox is unavailable here: the command was not run")

        def command(limits: WorkerLimits) -> list[str]:
            rl = [f"--{n.removeprefix('RLIMIT_').lower()}={v}" for n, v in limits.rlimits()]
            return ["/usr/bin/prlimit", *rl, "--", *argv]

        launched = self._launch(prep, command, extra_env=env)
        return launched.argv, launched.cleanup

    def _launch(
        self,
        prep: dict[str, Any],
        tail: Callable[[WorkerLimits], list[str]],
        *,
        worker: bool = False,
        background: bool = False,
        **options: Any,
    ) -> _Launched:
        """The full launch line (``tail`` appended) and the cleanup to run after it exits.

        A worker gets the seccomp program as an fd the host opened (its number is whatever
        it got, passed to the worker with its pipes); a one-shot command, which gets no fds,
        has it opened on fd 3 by its launch line.
        """
        limits = WorkerLimits(self.limits, self._cgroups())
        made: list[str] = []  # scratch workspace, mount points: removed after the process
        bpf_fd: int | None = None
        # A worker's cleanup runs on a reaper thread: it may wait for a fork bomb to die.
        wait = 30.0 if worker else 2.0

        def cleanup() -> None:
            limits.cleanup(timeout=wait)
            for path in reversed(made):
                shutil.rmtree(path, ignore_errors=True)

        try:
            if prep["seccomp"]:
                if worker:
                    bpf_fd = open_bpf(prep["bpf"])
                    options["seccomp_fd"] = bpf_fd
                else:
                    options["seccomp_file"] = prep["bpf"]
            workspace = self.workspace
            if workspace is None:
                workspace = tempfile.mkdtemp(prefix="ws-", dir=rundir())
                made.append(workspace)
            self._own_workspace(workspace)
            procs = limits.launch_procs_files(background)
            line, points = self._command(prep, procs, workspace=workspace, **options)
            if points:
                made.append(points)
            return _Launched([*line, *tail(limits)], cleanup, workspace, bpf_fd)
        except BaseException:
            if bpf_fd is not None:
                os.close(bpf_fd)
            cleanup()
            raise

    def _command(
        self,
        prep: dict[str, Any],
        procs: list[str],
        *,
        workspace: str,
        deps: str | None = None,
        site: str | None = None,
        tmp_size_mb: int | None = None,
        seccomp_fd: int | None = None,
        seccomp_file: str | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> tuple[list[str], str | None]:
        """The launch line up to the interpreter: sh (cgroups), [binds], setpriv, bwrap.

        ``seccomp_fd``: the number of the BPF program's fd, passed to the child as is; or
        ``seccomp_file``: the BPF program, opened on fd 3 by the launch line (``WITH_FD``).
        Returns it with the directory of private mount points to remove after the worker
        exits (None when every host path is reachable by the sandbox uid as it is).
        """
        deps = deps if deps and os.path.isdir(deps) else None
        given = {"workspace": workspace, "deps": deps, "site": site, "worker": WORKER_PKG}
        keys = [k for k, v in given.items() if v]
        # The workspace is the sandbox uid's own (only the way to it must be open).
        binds = private_binds(
            [str(given[k]) for k in keys],
            lambda p: self._reachable(p, whole=p != workspace),
            prefix="mnt-",
        )
        paths = {**given, **dict(zip(keys, binds.sources, strict=True))}
        argv = ["/bin/sh", "-c", _LAUNCHER, "codemode-sandbox", *procs, "--"]
        if seccomp_file is not None:
            seccomp_fd = 3
            argv += ["/bin/sh", "-c", WITH_FD, "codemode-sandbox", str(seccomp_fd), seccomp_file]
        argv += binds.argv("codemode-binds")
        if os.geteuid() == 0:
            argv += setpriv_args(prep["setpriv"], self.uid, self.gid)
        argv += bwrap_args(
            bwrap=prep["bwrap"],
            workspace=str(paths["workspace"]),
            python_prefix=prep["prefix"],
            worker_pkg=str(paths["worker"]),
            deps_dir=paths["deps"],
            site_dir=paths["site"],
            env={**SANDBOX_ENV, **self.env, **(extra_env or {})},
            tmp_size_mb=tmp_size_mb if tmp_size_mb is not None else self.limits.tmp_size_mb,
            seccomp_fd=seccomp_fd,
        )
        return argv, binds.mount_points

    def _reachable(self, path: str, *, whole: bool) -> bool:
        target = path if whole else os.path.dirname(path)
        return traversable(target, self.uid, self.gid, read_last=whole)

    def _own_workspace(self, path: str) -> None:
        """The sandbox uid must reach and write its workspace.

        A directory it cannot write yet is given to it (``chown`` of the top directory
        only, never recursive); a world-writable one is left as it is.
        """
        try:
            st = os.stat(path)
        except OSError as exc:
            raise ConfigError(f"the sandbox workspace {path} cannot be used: {exc}") from exc
        if not stat.S_ISDIR(st.st_mode):
            raise ConfigError(f"the sandbox workspace {path} is not a directory")
        if not self._reachable(path, whole=False) and not can_private_mount():
            raise ConfigError(
                f"the sandbox workspace {path} is unreachable for uid {self.uid}: a parent "
                f"directory of it is not searchable by that user. Fix: chmod o+x the parents "
                f"of {path}, or choose a workspace elsewhere (e.g. under /var/tmp)"
            )
        if writable_by(st, self.uid, self.gid):
            return
        if os.geteuid() != 0:
            raise ConfigError(f"the sandbox workspace {path} is not writable by uid {self.uid}")
        os.chown(path, self.uid, self.gid)
        if not st.st_mode & stat.S_IWUSR:
            os.chmod(path, stat.S_IMODE(st.st_mode) | stat.S_IRWXU)

    async def prepare(self) -> None:
        if self._prepared is None:
            await off_loop(self._prepare)

    @property
    def quota(self) -> WorkspaceQuota:
        mb, files = self.limits.workspace_mb, self.limits.workspace_files
        return WorkspaceQuota(None if mb is None else mb << 20, files)

    async def start(self, handler: Any) -> Any:
        worker = await super().start(handler)
        if worker.workspace is None:
            return worker  # weaker mode: a plain subprocess, nothing mounted
        mb = self.limits.memory_mb
        tree = mb << 20 if mb is not None and not self._cgroups().has("memory") else None
        return GuardedWorker(
            worker,
            worker.workspace,
            self.quota,
            hints=self._size_hints,
            uid=self.uid,
            memory_limit=tree,  # where no memory cgroup holds the whole tree
        )


__all__ = [
    "SANDBOX_GID",
    "SANDBOX_UID",
    "WORKSPACE",
    "Check",
    "SandboxExecutor",
    "WeakerSandboxWarning",
    "bwrap_args",
    "sandbox_python",
    "setpriv_args",
    "userns_check",
]
