"""Upstream stdio MCP servers in a jail of their own, so the sandbox cannot hand them a race.

A server such as the filesystem server, given ``<workspace>/files``, checks a path and then
opens it; between the two the sandbox can swap a file for a symlink to ``/etc/shadow``, or
plant a FIFO that blocks its reader. codemode cannot fix third-party servers; it makes sure
the swap leads nowhere:

- **a dedicated uid** (:func:`~codemode.isolation.uids.server_uid`, never the sandbox's)
  when codemode runs as root, with a **private HOME** (its own ``.gitconfig``, npm cache);
- **a jail** (:mod:`.jail`) that shows the host's ``/usr`` and a few ``/etc`` files
  read-only, the server's own runtime read-only at its own paths (its interpreter or venv,
  its ``node_modules``, its script's directory), and the paths it was configured with at
  the same absolute paths (directories writable unless ``read_only``, ``nosuid,nodev``; a
  data file with nothing else of its folder: :mod:`.datafiles`); nothing else. It starts
  where it would unjailed (:func:`~.paths.server_cwd`), so relative paths agree. A
  symlink swapped in resolves *inside* that view: ``/root``, other workspaces and the
  workspace's own configuration do not exist there;
- **no network** for a server given a path inside the workspace, unless ``"network": true``
  (git hooks or ``core.fsmonitor`` planted in a repository there must not reach out);
- the workspace directory it is given gets a default ACL so the sandbox's uid and the
  server's uid can both write what the other creates (:mod:`.acl`);
- ``"isolation": "none"`` runs it as before, as codemode's own user: logged as a warning
  at every start and listed by ``codemode doctor``.

When codemode is not root, servers keep the user's uid; servers given a workspace path are
still jailed (bubblewrap works unprivileged).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import shutil
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..config import StdioServerConfig
from ..errors import ConfigError, ServerUnavailable
from . import acl, datafiles, jail
from .paths import NamedPath, entry_into, named_paths, reaches, server_cwd, workspace_roots
from .sharing import share
from .uids import SANDBOX_UID, server_uid
from .views import Refused, by_fd, resolve, sandbox_views, view_ids

log = logging.getLogger(__name__)

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SERVER_ETC = ("/etc/passwd", "/etc/group", "/etc/localtime", "/etc/timezone", "/etc/mime.types")
HOMES_ROOT = "/var/lib/codemode/server-homes"


@dataclass(frozen=True)
class Isolation:
    """Where servers are isolated from: the workspace the sandbox writes into, if any."""

    workspace: Path | None = None
    """The workspace root: paths inside it (``files/`` first of all) are the sandbox's."""
    files: Path | None = None
    tenant: str | None = None
    sandbox_uid: int = SANDBOX_UID
    homes_root: str | None = None
    private: tuple[str, ...] = ()
    """Files and directories of codemode's no server may see (the workspace's configured
    keys, token files, logs): shown empty wherever a server's mounts hold them."""
    refuse_unjailed: str | None = None
    """Why a server may not run unjailed (``isolation: none``): a tenant's under ``serve
    --tenants`` (``Workspace.serve_as_tenant``); None: it may."""
    prepare: Callable[[], None] | None = field(default=None, compare=False)
    """Makes those of ``private`` that codemode would otherwise create at first use (an
    absolute audit log's directory, a key): called before each server starts, since a
    path that does not exist cannot be hidden and a server that made it first owns it."""


@dataclass
class ServerLaunch:
    """What to start for one server: the command line, and what to undo after it exits."""

    command: str
    args: list[str]
    env: dict[str, str] | None
    cwd: str | None
    isolated: bool
    summary: str
    launch: jail.Launch | None = None
    mounts: list[jail.Mount] = field(default_factory=list)

    @property
    def pass_fds(self) -> list[int]:
        """Descriptors to hand the process (its jail's mounts, held since their walk)."""
        return list(self.launch.pass_fds) if self.launch is not None else []

    def cleanup(self) -> None:
        if self.launch is not None:
            self.launch.cleanup()


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _in_system(path: str) -> bool:
    return any(_within(path, d) for d in SYSTEM_DIRS)


def _resolve_command(cfg: StdioServerConfig) -> str | None:
    if os.sep in cfg.command:
        return os.path.abspath(os.path.join(server_cwd(cfg), cfg.command))
    path = cfg.env.get("PATH") or os.environ.get("PATH") or "/usr/bin:/bin"
    return shutil.which(cfg.command, path=path)


def runtime_mounts(file: str) -> list[jail.Mount]:
    """Read-only mounts a program at ``file`` needs: its venv and base interpreter, the
    ``node_modules`` it lives in, or its own directory; nothing under ``/usr``."""
    literal = os.path.abspath(file)
    out: list[jail.Mount] = []
    real = os.path.realpath(literal)
    for path in dict.fromkeys((literal, real)):
        if _in_system(path):
            continue
        parts = Path(path).parts
        if "node_modules" in parts:
            top = str(Path(*parts[: parts.index("node_modules") + 1]))
            out.append(jail.Mount(os.path.realpath(top), top))
            continue
        venv = _venv_root(path)
        if venv is not None:
            out.append(jail.Mount(os.path.realpath(venv), venv))
            base = _venv_base(venv)
            if base is not None and not _in_system(base):
                out.append(jail.Mount(base))
            continue
        parent = os.path.dirname(path)
        if parent not in ("/", "") and not _in_system(parent):
            out.append(jail.Mount(os.path.realpath(parent), parent))
    return out


def _venv_root(path: str) -> str | None:
    parent = Path(path).parent
    for cand in (parent.parent, parent):
        if (cand / "pyvenv.cfg").is_file():
            return str(cand)
    return None


def _venv_base(venv: str) -> str | None:
    try:
        text = (Path(venv) / "pyvenv.cfg").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return os.path.realpath(os.path.dirname(value.strip()))
    return None


def _home(iso: Isolation, name: str, uid: int | None, *, create: bool = True) -> str:
    key = hashlib.sha256(f"{iso.workspace}\0{name}".encode()).hexdigest()[:12]
    root = iso.homes_root
    if root is None:
        root = HOMES_ROOT if os.geteuid() == 0 else os.path.expanduser("~/.cache/codemode/homes")
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)[:40]
    home = os.path.join(root, f"{safe}-{key}")
    if not create:
        return home
    os.makedirs(root, mode=0o711, exist_ok=True)
    os.makedirs(home, mode=0o700, exist_ok=True)
    if uid is not None and os.geteuid() == 0:
        st = os.lstat(home)
        if not stat.S_ISDIR(st.st_mode):
            raise ServerUnavailable(f"{home} is not a directory", server=name)
        os.chown(home, uid, uid)
        os.chmod(home, 0o700)
    # the jail shows only the paths the server was given: trusting every repository it
    # can see is trusting those (git refuses repositories of another uid otherwise)
    _seed(home, ".gitconfig", b"[safe]\n\tdirectory = *\n", uid)
    return home


def _seed(home: str, name: str, content: bytes, uid: int | None) -> None:
    """Create ``home/name`` unless something is there already, never through a link.

    The home is the server's own: whatever the server (or a command the agent's code had
    it run) left there, a link to a file that does not exist yet included, stays as it
    is. Following such a link, root would create any file on the host and hand it to the
    server's uid (``/etc/ld.so.preload``: root for the server, and for the sandbox's code
    that can make it run a command)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        # O_EXCL: an entry of any kind, a dangling link too, is left alone (the path
        # above it is root's: the homes root, and the home checked to be a directory)
        fd = os.open(os.path.join(home, name), flags, 0o644)
    except FileExistsError:
        return
    try:
        os.write(fd, content)
        if uid is not None and os.geteuid() == 0:
            os.fchown(fd, uid, uid)
    finally:
        os.close(fd)


def plan(cfg: StdioServerConfig, iso: Isolation, *, dry_run: bool = False) -> ServerLaunch:
    """How to start ``cfg``: in its jail (the default), or as it is (``isolation: none``).

    ``dry_run`` only describes it (``codemode doctor``): nothing is created or changed.
    Every path the jail shows is walked to a descriptor (:mod:`.views`) and mounted by it;
    the launch holds copies of those it needs (``ServerLaunch.pass_fds``).
    """
    held: list[int] = []
    try:
        return _plan(cfg, iso, dry_run, held)
    except Refused as exc:
        raise ServerUnavailable(str(exc), server=cfg.name or cfg.command) from None
    except FileNotFoundError as exc:  # a path renamed while it was looked at
        raise ServerUnavailable(
            f"{exc.filename} changed while its jail was planned: {exc.strerror}",
            server=cfg.name or cfg.command,
        ) from None
    finally:
        for fd in held:
            os.close(fd)


def _plan(cfg: StdioServerConfig, iso: Isolation, dry_run: bool, held: list[int]) -> ServerLaunch:
    name = cfg.name or cfg.command
    cwd = server_cwd(cfg)
    if not os.path.isdir(cwd):
        raise ServerUnavailable(f"its working directory {cwd} does not exist", server=name)
    if cfg.isolation == "none" and iso.refuse_unjailed is not None:
        raise ServerUnavailable(
            f'"isolation": "none" is refused: {iso.refuse_unjailed}', server=name
        )
    if cfg.isolation == "none":
        (log.info if dry_run else log.warning)(
            "MCP server %r runs WITHOUT isolation (isolation: none in its config): as uid %d, "
            "with every file and network that user can reach",
            name,
            os.geteuid(),
        )
        return ServerLaunch(cfg.command, list(cfg.args), dict(cfg.env) or None, cwd, False, "none")
    workspace = str(iso.workspace.resolve()) if iso.workspace else None
    ws_files = str(iso.files.resolve()) if iso.files else None
    roots = workspace_roots(workspace, ws_files) if workspace is not None else set()
    views = sandbox_views(workspace, ws_files)
    ids = view_ids(views)
    root = os.geteuid() == 0
    data: list[jail.Mount] = []
    runtime: list[jail.Mount] = []
    files: list[NamedPath] = []
    touches: list[str] = []
    # The paths privacy's sink policy reads too (one parser): a server that gets tokens
    # because it writes into the sandbox's view is jailed without network for the same reason.
    for named in named_paths(cfg):
        literal = named.literal
        through = entry_into(literal, views) is not None
        inside = through or reaches(named.real, roots)
        if inside:
            touches.append(literal)
        # What is there now under the walk's policy (.views), not where realpath led: below
        # files/ the sandbox re-points links, and a data file's folder taken from one got
        # its neighbours listed and an ACL where the link led.
        real = resolve(literal, ids)
        named = NamedPath(literal, real, named.key)
        parent = os.path.dirname(real)
        if named.key == "PATH" and not inside:  # where programs are looked up: never written
            if os.path.isdir(real) and not _in_system(real):
                runtime.append(jail.Mount(real, literal))
        elif _within(real, "/etc") and not inside:
            # host configuration (a CA bundle, a config file) is read, never written: its
            # directory made writable got an ACL for the server's uid on the host's /etc
            if os.path.exists(real):
                runtime.append(jail.Mount(real, literal))
        elif os.path.isdir(real):
            data.append(jail.Mount(real, literal, writable=not cfg.read_only))
        elif os.path.isfile(real) and not inside and _is_program(real):
            runtime += runtime_mounts(literal)
        elif os.path.isdir(parent) and parent != "/" and not _in_system(parent):
            files.append(named)  # a data file: what of it to show is decided below
    if not root and not touches and iso.refuse_unjailed is None:
        # (a tenant's is jailed all the same: as the server's user it reads every tenant's)
        return ServerLaunch(cfg.command, list(cfg.args), dict(cfg.env) or None, cwd, False,
                            "no jail needed: not root, no workspace path")  # fmt: skip
    why = jail.available()
    if why is not None:
        raise ServerUnavailable(
            f'cannot isolate this server: {why}. Install it, or set "isolation": "none" '
            "for this server in mcp.json to run it with codemode's own rights",
            server=name,
        )
    command = _resolve_command(cfg)
    if command is None or not os.path.isfile(command):
        raise ServerUnavailable(f"command not found: {cfg.command!r}", server=name)
    if not os.access(command, os.X_OK):
        raise ServerUnavailable(f"command not executable: {cfg.command!r}", server=name)
    if iso.prepare is not None and not dry_run:
        try:
            iso.prepare()
        except (OSError, ConfigError) as exc:
            what = exc.strerror or str(exc) if isinstance(exc, OSError) else str(exc)
            where = f" {exc.filename}" if isinstance(exc, OSError) and exc.filename else ""
            raise ServerUnavailable(
                f"cannot create codemode's own{where} before this server starts (its jail "
                f"must hide it, so the server does not start): {what}",
                server=name,
            ) from None
    runtime += runtime_mounts(command)
    runtime += [jail.Mount(_at(cwd, p)) for p in cfg.read_only_paths]
    data += [jail.Mount(_at(cwd, p), writable=True) for p in cfg.writable_paths]
    runtime = by_fd(runtime, ids, held)
    data = by_fd(data, ids, held)
    own = datafiles.plan(
        files,
        [*runtime, *data],
        read_only=cfg.read_only,
        declared_read_only={resolve(_at(cwd, p), ids) for p in cfg.read_only_paths},
    )
    if own.problem is not None:
        raise ServerUnavailable(own.problem, server=name)
    data += by_fd(own.mounts, ids, held)
    uid = server_uid(iso.tenant) if root else None
    home = _home(iso, name, uid, create=not dry_run)
    if uid is not None and not dry_run:
        share(data, uid, iso.sandbox_uid, workspace, own, ids)
    network = cfg.network if cfg.network is not None else not touches
    env = {
        "PATH": cfg.env.get("PATH") or "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "USER": "codemode-mcp",
        "LOGNAME": "codemode-mcp",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        **{k: v for k, v in cfg.env.items() if k != "PATH"},
    }
    shown_home = by_fd([jail.Mount(home, writable=True)], ids, held)
    if dry_run and not shown_home:  # made at the first start
        shown_home = [jail.Mount(home, writable=True)]
    mounts = _dedupe([*runtime, *data, *shown_home])
    # It starts where it would start unjailed, so a relative path leads to the same place:
    # its configured cwd (relative to its config file's folder), else that folder; shown
    # as an empty read-only stand-in (but for what it was given below) when not mounted.
    stand_in = [] if _shown(cwd, mounts) else [cwd]
    hidden, hidden_files, reshown = _mask_workspace(
        mounts,
        workspace,
        ws_files,
        iso.private,
        create=not dry_run,
        uid=uid,
        shown_empty=(own.hidden, own.hidden_files),
    )
    spec = jail.JailSpec(
        mounts=mounts,
        uid=uid,
        gid=uid,
        network=network,
        env=env,
        cwd=cwd,
        empty_dirs=[] if stand_in else [cwd],
        stand_ins=stand_in,
        etc=SERVER_ETC,
        tmp_size_mb=256,
        hidden=hidden,
        hidden_files=hidden_files,
        reshown=reshown,
    )
    summary = (
        f"jail as uid {uid if uid is not None else os.geteuid()}, "
        f"{'network' if network else 'no network'}, mounts: "
        + ", ".join(f"{m.target}{' (rw)' if m.writable else ''}" for m in mounts)
        + (
            f"; shown empty: {', '.join([*hidden, *hidden_files])}"
            if hidden or hidden_files
            else ""
        )
        + f"; starts in {cwd}{' (an empty stand-in)' if stand_in else ''}"
    )
    if dry_run:
        return ServerLaunch(command, list(cfg.args), None, cwd, True, summary, mounts=mounts)
    launch = jail.build(spec, [command, *cfg.args])
    log.info("MCP server %r: %s", name, summary)
    return ServerLaunch(
        launch.argv[0],
        launch.argv[1:],
        {"PATH": "/usr/bin:/bin"},
        "/",
        True,
        summary,
        launch=launch,
        mounts=mounts,
    )


_PRIVATE: set[str] = set()


def keep_private(paths: Iterable[str | os.PathLike[str]]) -> None:
    """Files and directories no jailed server of this process may see, whatever it was
    given: ``serve --tenants`` names every tenant's workspace, token file and env file, so a
    server given a directory above them shows none but its own tenant's ``files/``."""
    _PRIVATE.update(os.path.realpath(os.path.expanduser(p)) for p in paths)


def _mask_workspace(
    mounts: list[jail.Mount],
    workspace: str | None,
    files: str | None,
    extra: Iterable[str] = (),
    *,
    create: bool = True,
    uid: int | None = None,
    shown_empty: tuple[list[str], list[str]] = ([], []),
) -> tuple[list[str], list[str], list[jail.Mount]]:
    """Where a server was given a directory holding codemode's own files (the workspace,
    ``~/.config/codemode`` with the audit and privacy keys, ``~/.local/state/codemode``,
    and every key, token, env or log file the configuration names elsewhere), what the
    jail shows there: an empty directory (but for the workspace's ``files/``) or an empty
    file. ``mcp.json``, ``config.json``, the memory and the keys are codemode's: a server
    the agent's code drives must not read them, nor rewrite them (``"executor":
    "inprocess"``, an unjailed server, a forged audit chain). A path that does not exist
    when the server starts cannot be covered: ``Isolation.prepare`` makes them first.

    ``create``: codemode's own directories are made now (0700) if missing. Left missing,
    bwrap would have to make the mount point in the server's view, as the server's uid: on
    a read-only mount, or in a directory of another owner, it cannot, and the server never
    starts; where it can, the directory codemode later keeps its keys in is the server's.

    ``uid``: the server's own uid (codemode runs as root). A path below a directory that
    uid cannot search (``~/.config`` is often 0700) cannot be covered: bwrap, which makes
    the jail's mounts as that uid, could not reach it, and the server would never start.
    That directory is shown empty instead: out of reach now, it may not stay so (an ACL
    codemode gives a later server of the same uid that was given it).

    ``shown_empty``: directories and files already shown empty (a data file's neighbours,
    :mod:`.datafiles`): what lies in them needs no cover, and mounts below them are made
    again after them like those below a hidden workspace."""
    from ..audit.keys import config_home, state_home

    private: list[tuple[str, str | None]] = []
    for own in (config_home(), state_home()):
        if create:
            with contextlib.suppress(OSError):
                os.makedirs(own, mode=0o700, exist_ok=True)
        if os.path.isdir(own) or not create:  # a directory that is not there holds nothing
            private.append((os.path.realpath(own), None))
    named = {os.path.realpath(os.path.expanduser(p)) for p in extra} | _PRIVATE
    private += [(p, None) for p in sorted(named) if p != workspace]
    if workspace is not None:
        private.append((workspace, files if files and _within(files, workspace) else None))
    hidden: list[str] = list(shown_empty[0])
    hidden_files: list[str] = list(shown_empty[1])
    reshown: list[jail.Mount] = []
    for m in mounts:
        real = _source(m).rstrip("/")
        for root, keep in private:
            if not _within(root, real or "/") or not os.path.lexists(root):
                continue
            seen_at = (m.target.rstrip("/") + root[len(real) :]) or "/"
            if seen_at in shown_empty[1] or any(_within(seen_at, h) for h in shown_empty[0]):
                continue
            shut = _unsearchable(real, os.path.dirname(root), uid) if uid is not None else None
            if shut is not None:  # what is out of reach now may not stay so: shown empty
                hidden.append((m.target.rstrip("/") + shut[len(real) :]) or "/")
                continue
            inside = (m.target.rstrip("/") + root[len(real) :]) or "/"
            (hidden if os.path.isdir(root) else hidden_files).append(inside)
            if keep is not None:
                shown = inside.rstrip("/") + keep[len(root.rstrip("/")) :]
                reshown.append(jail.Mount(keep, shown, writable=m.writable))
    # A mount the server was given below a hidden path (``files/out`` writable, inside a
    # read-only ``$HOME``) is made again after it, with its own flags: the empty tmpfs
    # covered it, and ``files/`` shown again carried the outer mount's flags instead.
    kept = [keep for _, keep in private if keep is not None]
    for m in mounts:
        real = _source(m)
        if not any(_within(m.target, h) for h in hidden):
            continue
        if any(_within(real, k) for k in kept) or not any(_within(real, r) for r, _ in private):
            reshown.append(dataclasses.replace(m))  # a new entry: the same descriptor
    reshown.sort(key=lambda m: m.target.rstrip("/").count("/"))  # parents first; stable
    return list(dict.fromkeys(hidden)), list(dict.fromkeys(hidden_files)), reshown


def _source(m: jail.Mount) -> str:
    """Where a mount's source is on the host: found by its walk, or by ``realpath``."""
    return m.src if m.fd is not None else os.path.realpath(m.src)


def _unsearchable(top: str, folder: str, uid: int) -> str | None:
    """The first directory from below the mount's own ``top`` (given to it, shared by ACL)
    down to ``folder`` that ``uid`` (group ``uid``, as the jail runs it) cannot search
    (``acl.may_search``: an ACL for another uid does not count), or None."""
    path = top.rstrip("/")
    for part in os.path.relpath(folder, top or "/").split(os.sep):
        if part in ("", "."):
            continue
        path = f"{path}/{part}"
        if not acl.may_search(path, uid, uid):
            return path
    return None


def _dedupe(mounts: list[jail.Mount]) -> list[jail.Mount]:
    """One mount per target (writable wins), parents before children."""
    by_target: dict[str, jail.Mount] = {}
    for m in mounts:
        old = by_target.get(m.target)
        if old is None or (m.writable and not old.writable):
            by_target[m.target] = m
    return sorted(by_target.values(), key=lambda m: (m.target.count("/"), m.target))


def _shown(path: str, mounts: list[jail.Mount]) -> bool:
    """Whether the jail has ``path`` without a stand-in: inside a mount, or part of the
    system root the jail is built on (a stand-in there would cover ``/usr`` or ``/tmp``)."""
    if path in ("/", "/tmp", "/etc", "/proc", "/dev") or _in_system(path):
        return True
    return any(_within(path, d) for d in ("/proc", "/dev")) or any(
        _within(path, m.target) for m in mounts
    )


def _at(cwd: str, path: str) -> str:
    """``path`` from the configuration, absolute: relative ones start where the server does."""
    return os.path.abspath(os.path.join(cwd, os.path.expanduser(path)))


def _is_program(path: str) -> bool:
    """A file the server runs (script, module, binary) rather than data it works on."""
    if path.endswith((".js", ".mjs", ".cjs", ".py", ".pyz", ".ts", ".sh")):
        return True
    return os.access(path, os.X_OK) or "node_modules" in Path(path).parts


__all__ = ["Isolation", "ServerLaunch", "keep_private", "plan", "runtime_mounts"]
