"""pip, run so that nothing the agent's code controls can make it run code on the host.

``deps.add('evil.tar.gz')`` once made pip, started as root in the host's working directory,
resolve the name to a file the sandbox wrote and run its build backend. The whole class is
closed in three layers:

1. **What pip is told** (:func:`canonical_spec`): only ``canonicalize_name(name)``, sorted
   canonical extras and a version specifier re-rendered from parsed versions; never the
   caller's text. URLs (``name @ url``), paths, options, markers and ``===`` are refused,
   so no spec can name a file, an index or a flag.
2. **What pip reads**: a cleared environment with ``PIP_CONFIG_FILE=/dev/null`` and
   ``--isolated`` (no ``PIP_*`` variable, no user or site config), a fixed empty read-only
   working directory, ``--only-binary=:all:`` (no sdist is ever built), no find-links. The
   administrator's system-wide config is honoured only for what cannot name local code:
   ``index-url``/``extra-index-url`` over http(s), ``cert``, ``constraint``, ``timeout``,
   ``proxy`` (see :class:`PipPolicy`).
3. **Where pip runs**: in a jail (:mod:`codemode.isolation.jail`) as its own unprivileged
   uid: first ``pip download`` with the network and nothing writable but an empty download
   directory, then ``pip install --no-index --no-deps`` of exactly the downloaded wheels,
   without network, writing only a fresh target directory. The host then copies in regular
   files and directories only, without setuid bits, owned by itself.
"""

from __future__ import annotations

import asyncio
import configparser
import contextlib
import importlib.util
import os
import re
import shutil
import stat
import sys
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ...errors import DepsError
from ...isolation import jail
from ...isolation.uids import DEPS_UID

_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*\Z")
_OPERATORS = ("==", "!=", "<=", ">=", "<", ">", "~=")
DEFAULT_INDEX = "https://pypi.org/simple"
PIP_MOUNT = "/opt/codemode-pip"
MB = 1 << 20
WATCH_EVERY = 0.1
"""Seconds between two looks at how much pip wrote (``max_bytes``)."""
_BOOT = (
    f"import sys;sys.path.insert(0,{PIP_MOUNT!r});"
    "from pip._internal.cli.main import main;sys.exit(main())"
)


def canonical_spec(spec: str) -> str:
    """``spec`` as codemode re-renders it for pip, or :class:`DepsError` saying why not."""
    if not isinstance(spec, str) or not spec.strip():
        raise DepsError("a package spec is a non-empty string such as 'six==1.16.0'")
    text = spec.strip()
    if text.startswith("-") or any(c in text for c in "\n\r\0"):
        raise DepsError(f"{spec!r}: pip options are not allowed, only a package requirement")
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise DepsError(f"{spec!r} is not a valid requirement: {exc}") from None
    if req.url:
        raise DepsError(
            f"{spec!r}: URL and path requirements are not allowed; name a package of the "
            "index, e.g. 'six==1.16.0'"
        )
    if req.marker is not None:
        raise DepsError(f"{spec!r}: environment markers are not allowed here")
    name = canonicalize_name(req.name)
    extras = sorted(canonicalize_name(e) for e in req.extras)
    for part in (name, *extras):
        if not _NAME.match(part):
            raise DepsError(f"{spec!r}: {part!r} is not a package name")
    pins = []
    for s in req.specifier:
        if s.operator not in _OPERATORS:
            raise DepsError(f"{spec!r}: the operator {s.operator!r} is not allowed")
        wildcard = s.version.endswith(".*") and s.operator in ("==", "!=")
        try:
            version = str(Version(s.version[:-2] if wildcard else s.version))
        except InvalidVersion:
            raise DepsError(f"{spec!r}: {s.version!r} is not a version") from None
        pins.append(f"{s.operator}{version}{'.*' if wildcard else ''}")
    return name + (f"[{','.join(extras)}]" if extras else "") + ",".join(sorted(pins))


# -- the administrator's pip configuration ------------------------------------------------


@dataclass(frozen=True)
class PipPolicy:
    """The options pip gets from codemode; nothing else reaches it."""

    index_url: str = DEFAULT_INDEX
    extra_index_urls: tuple[str, ...] = ()
    cert: str | None = None
    constraint: str | None = None
    timeout: str | None = None
    proxy: str | None = None
    ignored: tuple[str, ...] = field(default=(), compare=False)
    """``file: key`` of system settings left out, for the log and ``codemode doctor``."""

    @classmethod
    def from_system(
        cls, files: Sequence[str] | None = None, *, index_url: str | None = None
    ) -> PipPolicy:
        """Read the system-wide pip config files (``/etc/xdg/pip/pip.conf``, then
        ``/etc/pip.conf``; later wins), as pip would. Only root-owned files that nobody
        else can write are read; user and site config and ``PIP_*`` variables are not."""
        if files is None:
            dirs = os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
            files = [os.path.join(d, "pip", "pip.conf") for d in dirs.split(":") if d]
            files.append("/etc/pip.conf")
        values: dict[str, str] = {}
        ignored: list[str] = []
        for path in files:
            try:
                st = os.stat(path)
            except OSError:
                continue
            if st.st_uid != 0 or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                ignored.append(f"{path}: not owned by root alone")
                continue
            parser = configparser.RawConfigParser()
            with contextlib.suppress(configparser.Error, OSError):
                parser.read(path)
                for section in ("global", "download", "install"):
                    if parser.has_section(section):
                        for key, value in parser.items(section):
                            values[key.replace("_", "-")] = value
        out: dict[str, object] = {}
        for key, value in values.items():
            if key in ("index-url", "extra-index-url"):
                urls = value.split()
                bad = [u for u in urls if not u.startswith(("https://", "http://"))]
                ignored += [f"{key} {u} (not an http(s) index)" for u in bad]
                good = [u for u in urls if u not in bad]
                if key == "index-url" and good:
                    out["index_url"] = good[0]
                elif key == "extra-index-url":
                    out["extra_index_urls"] = tuple(good)
            elif key in ("timeout", "proxy") or (
                key in ("cert", "constraint") and os.path.isabs(value)
            ):
                out[key] = value
            else:
                ignored.append(key)
        if index_url:
            if not index_url.startswith(("https://", "http://")):
                raise DepsError(f"deps index {index_url!r}: give an http(s) URL")
            out["index_url"] = index_url
        return cls(**out, ignored=tuple(ignored))  # type: ignore[arg-type]

    def args(self) -> list[str]:
        a = ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            a += ["--extra-index-url", url]
        for key in ("cert", "constraint", "timeout", "proxy"):
            value = getattr(self, key)
            if value:
                a += [f"--{key}", value]
        return a

    def files(self) -> list[str]:
        return [p for p in (self.cert, self.constraint) if p and os.path.exists(p)]


# -- running pip -----------------------------------------------------------------------------


def _pip_package() -> str:
    found = importlib.util.find_spec("pip")
    if found is None or not found.submodule_search_locations:
        raise DepsError("pip is not installed in codemode's environment (pip install pip)")
    return os.path.realpath(next(iter(found.submodule_search_locations)))


def _interpreter(python: str) -> tuple[str, str]:
    from ...execution.hostchecks import _python_prefix

    exe = os.path.realpath(python)
    return exe, _python_prefix(exe)


class JailedPip:
    """Download then install wheels with pip, each phase in its own jail."""

    def __init__(self, python: str | None = None, policy: PipPolicy | None = None) -> None:
        self.python = python or sys.executable
        self.policy = policy or PipPolicy.from_system()

    def _spec(self, mounts: list[jail.Mount], *, network: bool) -> jail.JailSpec:
        exe, prefix = _interpreter(self.python)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_NO_INPUT": "1",
        }
        if network:
            env.update(_proxy_env(os.environ))
        base = [
            jail.Mount(os.path.dirname(exe)),
            jail.Mount(prefix),
            jail.Mount(_pip_package(), f"{PIP_MOUNT}/pip"),
            *(jail.Mount(p) for p in self.policy.files()),
        ]
        return jail.JailSpec(
            mounts=base + mounts,
            uid=DEPS_UID,
            gid=DEPS_UID,
            network=network,
            env=env,
            cwd="/empty",
            empty_dirs=["/empty"],
            tmp_size_mb=256,
        )

    async def install(
        self, specs: Sequence[str], target: Path, timeout: float, max_bytes: int | None = None
    ) -> None:
        """Install ``specs`` (already canonical) into the empty directory ``target``.

        ``max_bytes``: disk pip may fill meanwhile (downloads, unpacked files), checked as
        it writes: past it pip is stopped and nothing is installed."""
        specs = [canonical_spec(s) for s in specs]
        scratch = target.parent / f".pip-{uuid.uuid4().hex}"
        dl, out, tmp = scratch / "dl", scratch / "out", scratch / "tmp"
        for d in (scratch, dl, out, tmp):
            d.mkdir(mode=0o700)
            if os.geteuid() == 0:
                os.chown(d, DEPS_UID, DEPS_UID)
        exe, _ = _interpreter(self.python)
        try:
            async with asyncio.timeout(timeout):
                await self._bounded(scratch, max_bytes, self._run(
                    self._spec([jail.Mount(str(dl), "/dl", writable=True)], network=True),
                    [exe, "-I", "-S", "-c", _BOOT, "download", "--isolated",
                     "--only-binary=:all:", "--no-cache-dir", "--disable-pip-version-check",
                     "--no-input", "--progress-bar", "off", *self.policy.args(),
                     "--dest", "/dl", "--", *specs],
                ))  # fmt: skip
                wheels = sorted(p.name for p in dl.iterdir())
                bad = [w for w in wheels if not re.fullmatch(r"[\w.+-]+\.whl", w)]
                if bad or not wheels:
                    raise DepsError(f"pip downloaded something other than wheels: {bad}")
                mounts = [
                    jail.Mount(str(dl), "/dl"),
                    jail.Mount(str(out), "/out", writable=True),
                    jail.Mount(str(tmp), "/scratch", writable=True),
                ]
                spec = self._spec(mounts, network=False)
                spec.env = {**spec.env, "TMPDIR": "/scratch"}
                await self._bounded(scratch, max_bytes, self._run(
                    spec,
                    [exe, "-I", "-S", "-c", _BOOT, "install", "--isolated", "--no-index",
                     "--no-deps", "--only-binary=:all:", "--no-cache-dir",
                     "--disable-pip-version-check", "--no-input", "--no-warn-script-location",
                     "--target", "/out", *(f"/dl/{w}" for w in wheels)],
                ))  # fmt: skip
            await asyncio.to_thread(_adopt, out, target)
        except TimeoutError:
            raise DepsError(f"pip did not finish within {timeout:.0f}s") from None
        finally:  # a failed install left its downloads behind, on every failure
            await asyncio.to_thread(shutil.rmtree, scratch, True)

    @staticmethod
    async def _bounded(scratch: Path, max_bytes: int | None, work: Awaitable[None]) -> None:
        """``work`` (a pip run), stopped when ``scratch`` holds more than ``max_bytes``.

        One tenant's agent asking for package after package (or one huge wheel) filled the
        disk every tenant's workspace is on: its writes and theirs then failed."""
        task = asyncio.ensure_future(work)
        try:
            while max_bytes is not None:
                done, _ = await asyncio.wait({task}, timeout=WATCH_EVERY)
                # looked at once more when pip is done: a quick run ends between two looks
                if await asyncio.to_thread(tree_size, scratch) > max_bytes:
                    raise DepsError(
                        f"the install needs more than the {max_bytes / MB:.1f} MB of disk the "
                        "deps quota leaves (memory.deps_quota_mb): pip was stopped and nothing "
                        "was installed. Remove packages you no longer need (deps.remove), or "
                        "raise the quota"
                    )
                if done:
                    break
            await task
        finally:
            if not task.done():
                task.cancel()  # _run kills pip
                with contextlib.suppress(BaseException):
                    await task

    async def _run(self, spec: jail.JailSpec, command: list[str]) -> None:
        if jail.available() is not None and os.geteuid() != 0:
            argv, launch = command, None  # unprivileged and no bubblewrap: pip as the user
        else:
            launch = jail.build(spec, command)
            argv = launch.argv
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={"PATH": "/usr/bin:/bin"} if launch else {**spec.env},
            cwd="/",
        )
        try:
            out, _ = await proc.communicate()
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise
        finally:
            if launch is not None:
                launch.cleanup()
        if proc.returncode != 0:
            raise DepsError(
                "pip failed:\n"
                + _tail(out.decode(errors="replace"))
                + "\n(codemode installs wheels only, from the package index: no source builds, "
                "no local files or URLs)"
            )


def tree_size(root: Path) -> int:
    """Bytes of the regular files under ``root`` (links not followed, never fails)."""
    total = 0
    for folder, _, names in os.walk(root):
        for name in names:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(folder, name))
                if stat.S_ISREG(st.st_mode):
                    total += st.st_size
    return total


def _tail(output: str, lines: int = 12) -> str:
    rows = [r for r in output.strip().splitlines() if r.strip()]
    errors = [r for r in rows if r.startswith("ERROR")]
    return "\n".join(errors or rows[-lines:])


def _proxy_env(env: Mapping[str, str]) -> dict[str, str]:
    keys = ("https_proxy", "http_proxy", "no_proxy", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY")
    return {k: env[k] for k in keys if env.get(k)}


def _adopt(src: Path, dst: Path) -> None:
    """Copy what the jail installed into ``dst``: regular files and directories only,
    modes without setuid/setgid or group/other write, owned by the host user."""
    uid, gid = os.geteuid(), os.getegid()
    for root, dirs, files in os.walk(src, followlinks=False):
        rel = Path(root).relative_to(src)
        for name in [*dirs]:
            path = Path(root) / name
            if path.is_symlink() or not stat.S_ISDIR(path.lstat().st_mode):
                dirs.remove(name)
                continue
            (dst / rel / name).mkdir(mode=0o755, exist_ok=True)
        for name in files:
            path = Path(root) / name
            st = path.lstat()
            if not stat.S_ISREG(st.st_mode):
                continue  # symlinks, FIFOs, devices: a wheel has none of them
            target = dst / rel / name
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as fin, open(target, "wb") as fout:
                shutil.copyfileobj(fin, fout)
            os.chmod(target, 0o755 if st.st_mode & stat.S_IXUSR else 0o644)
            if os.geteuid() == 0:
                os.chown(target, uid, gid)


__all__ = ["DEFAULT_INDEX", "JailedPip", "PipPolicy", "canonical_spec", "tree_size"]
