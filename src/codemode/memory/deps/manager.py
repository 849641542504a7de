"""Packages for the agent's code, installed into a per-workspace directory.

``<root>`` (``<workspace>/deps``) is a ``pip install --target`` directory that the session's
worker puts on ``sys.path``; codemode's own environment is never touched. Beside the
packages, ``<root>/.requirements.json`` lists the specs asked for, so ``sync`` can rebuild
the directory from scratch. pip always installs into a hidden fresh directory whose contents
are moved in at the end (the directory itself stays: it may be bind-mounted), so a failed
install changes nothing.

How pip is run (canonical specs only, wheels only, in a jail as its own uid) is
:mod:`codemode.deps.pip`. ``allow_runtime_deps=False`` refuses changes asked for at run
time (the agent's code, the MCP tools); the configured list can still be installed.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import os
import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ...errors import DepsError
from ...storage.locks import file_lock
from .pip import JailedPip, PipPolicy, canonical_spec, tree_size

MANIFEST = ".requirements.json"
PIP_TIMEOUT = 600.0


def check_spec(spec: str) -> Requirement:
    """The requirement codemode would hand pip for ``spec`` (see :func:`canonical_spec`)."""
    return Requirement(canonical_spec(spec))


class Deps:
    """The workspace's extra packages (``root`` is usually ``<workspace>/deps``)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        allow_runtime_deps: bool = True,
        configured: Sequence[str] = (),
        python: str | None = None,
        timeout: float = PIP_TIMEOUT,
        index_url: str | None = None,
        max_bytes: int | None = None,
    ) -> None:
        """``max_bytes``: disk the deps directory may use, pip's work in progress included
        (None: no limit)."""
        self.root = Path(root).expanduser().absolute()
        self.max_bytes = max_bytes
        self.site = self.root
        self.allow_runtime_deps = allow_runtime_deps
        self.configured = [canonical_spec(s) for s in configured]
        self.python = python or sys.executable
        self.timeout = timeout
        self.index_url = index_url
        self._pip: JailedPip | None = None
        self.on_change: Callable[[str, str], None] | None = None
        """Called with (``deps.add``/``deps.remove``/``deps.sync``, spec) after a change."""
        # The worker's import system caches a missing path entry for good: create it now.
        self.site.mkdir(parents=True, exist_ok=True)

    @property
    def pip(self) -> JailedPip:
        if self._pip is None:
            self._pip = JailedPip(self.python, PipPolicy.from_system(index_url=self.index_url))
        return self._pip

    def __repr__(self) -> str:
        return f"Deps({str(self.root)!r})"

    # -- manifest --------------------------------------------------------------------
    def _read_manifest(self) -> list[str]:
        try:
            data = json.loads((self.root / MANIFEST).read_text())
        except FileNotFoundError:
            return []
        except ValueError as exc:
            raise DepsError(f"{self.root / MANIFEST} is not valid JSON: {exc}") from None
        specs = data.get("requirements", []) if isinstance(data, dict) else None
        if not isinstance(specs, list):
            raise DepsError(f"{self.root / MANIFEST}: 'requirements' is not a list")
        # Checked as an added spec is: what reaches pip never holds an option or a URL,
        # whoever wrote the file (an older codemode, a person, a restored backup).
        try:
            return [canonical_spec(s) for s in specs]
        except DepsError as exc:
            raise DepsError(f"{self.root / MANIFEST}: {exc}; remove that entry") from None

    def _write_manifest(self, specs: list[str]) -> None:
        path = self.root / MANIFEST
        tmp = path.with_name(f".{MANIFEST}.{uuid.uuid4().hex}")
        tmp.write_text(json.dumps({"requirements": specs}, indent=2) + "\n")
        os.replace(tmp, path)

    @contextlib.asynccontextmanager
    async def _locked(self, timeout: float = PIP_TIMEOUT) -> AsyncIterator[None]:
        def busy() -> Exception:
            return DepsError(f"{self.root} is busy with another install")

        async with file_lock(self.root / ".lock", timeout, busy):
            yield

    # -- pip -------------------------------------------------------------------------
    async def _pip_install(self, target: Path, specs: Sequence[str], *, fresh: bool) -> None:
        """``fresh``: the result replaces every package (``sync``), rather than joining them."""
        if specs:
            room = None
            if self.max_bytes is not None:
                held = 0 if fresh else await asyncio.to_thread(tree_size, self.site)
                room = max(0, self.max_bytes - held)
            await self.pip.install(specs, target, self.timeout, room)

    def _installed(self) -> dict[str, metadata.Distribution]:
        return {
            canonicalize_name(d.metadata["Name"]): d
            for d in metadata.distributions(path=[str(self.site)])
            if d.metadata["Name"]
        }

    def _uninstall(self, name: str) -> bool:
        dist = self._installed().get(canonicalize_name(name))
        if dist is None:
            return False
        site = self.site.resolve()
        dirs: set[Path] = set()
        for rel in dist.files or []:
            path = (self.site / rel).resolve()
            if site not in path.parents:
                continue  # never delete outside the deps directory
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                path.unlink()
            dirs.add(path.parent)
        for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
            while d != site and site in d.parents:
                if d.name == "__pycache__" or d.name.endswith(".dist-info"):
                    shutil.rmtree(d, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        d.rmdir()
                d = d.parent
        return True

    # -- public API ------------------------------------------------------------------
    def _check_runtime(self, what: str) -> None:
        if not self.allow_runtime_deps:
            raise DepsError(
                f"cannot {what} packages: runtime deps are turned off for this session "
                "(allow_runtime_deps=False); ask the operator to configure them"
            )

    async def add(self, spec: str, *, runtime: bool = True) -> dict[str, Any]:
        """Install ``spec`` into the deps directory and remember it for ``sync``."""
        if runtime:
            self._check_runtime("add")
        req = check_spec(spec)
        async with self._locked():
            fresh = self.root / f".add-{uuid.uuid4().hex}"
            fresh.mkdir()
            try:
                await self._pip_install(fresh, [str(req)], fresh=False)
                await asyncio.to_thread(self._merge_in, fresh)
            finally:
                await asyncio.to_thread(shutil.rmtree, fresh, True)
            specs = [
                s
                for s in self._read_manifest()
                if canonicalize_name(Requirement(s).name) != canonicalize_name(req.name)
            ]
            self._write_manifest([*specs, str(req)])
            dist = self._installed().get(canonicalize_name(req.name))
        self._changed("deps.add", str(req))
        return {
            "name": req.name,
            "spec": str(req),
            "version": dist.version if dist else None,
            "site": str(self.site),
        }

    async def remove(self, name: str, *, runtime: bool = True) -> bool:
        """Forget ``name`` and delete its files (packages it pulled in stay until ``sync``)."""
        if runtime:
            self._check_runtime("remove")
        req = check_spec(name)
        key = canonicalize_name(req.name)
        async with self._locked():
            specs = self._read_manifest()
            kept = [s for s in specs if canonicalize_name(Requirement(s).name) != key]
            self._write_manifest(kept)
            removed = await asyncio.to_thread(self._uninstall, req.name)
        changed = removed or len(kept) != len(specs)
        if changed:
            self._changed("deps.remove", req.name)
        return changed

    async def list(self) -> list[dict[str, Any]]:
        """The specs asked for, with the version installed (None if missing)."""
        installed = await asyncio.to_thread(self._installed)
        rows = []
        for spec in self._read_manifest():
            name = Requirement(spec).name
            dist = installed.get(canonicalize_name(name))
            rows.append({"name": name, "spec": spec, "version": dist.version if dist else None})
        return rows

    async def sync(self) -> dict[str, Any]:
        """Rebuild ``site`` from the manifest plus the configured specs, then swap it in."""
        async with self._locked():
            specs = self._read_manifest()
            names = {canonicalize_name(Requirement(s).name) for s in specs}
            extra = [
                s for s in self.configured if canonicalize_name(Requirement(s).name) not in names
            ]
            specs += extra
            fresh = self.root / f".sync-{uuid.uuid4().hex}"
            fresh.mkdir()
            try:
                await self._pip_install(fresh, specs, fresh=True)
                await asyncio.to_thread(self._swap_in, fresh)
            finally:
                await asyncio.to_thread(shutil.rmtree, fresh, True)
            if extra:
                self._write_manifest(specs)
        self._changed("deps.sync", ", ".join(specs))
        return {"installed": specs, "site": str(self.site)}

    def _changed(self, op: str, name: str) -> None:
        if self.on_change is not None:
            self.on_change(op, name)

    def _merge_in(self, fresh: Path) -> None:
        """Move what pip installed in ``fresh`` into ``site``, replacing older versions."""
        for dist in metadata.distributions(path=[str(fresh)]):
            if dist.metadata["Name"]:
                self._uninstall(dist.metadata["Name"])
        for entry in list(fresh.iterdir()):
            dest = self.site / entry.name
            if entry.name == "bin" and dest.is_dir():
                for script in entry.iterdir():
                    os.replace(script, dest / script.name)
                continue
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            elif dest.exists() or dest.is_symlink():
                dest.unlink()
            os.rename(entry, dest)

    def _swap_in(self, fresh: Path) -> None:
        """Replace the packages in ``site`` (not the directory: it may be bind-mounted)."""
        for entry in list(self.site.iterdir()):
            if entry.name.startswith("."):
                continue  # our manifest, lock and the fresh directory itself
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        for entry in list(fresh.iterdir()):
            os.rename(entry, self.site / entry.name)

    async def install_configured(self) -> builtins.list[str]:
        """Install configured specs that are not installed yet; returns what was added."""
        if not self.configured:
            return []
        installed = await asyncio.to_thread(self._installed)
        missing = [
            s for s in self.configured if canonicalize_name(Requirement(s).name) not in installed
        ]
        for spec in missing:
            await self.add(spec, runtime=False)
        return missing
