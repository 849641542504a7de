"""A real plugin package, built with ``pip wheel`` and installed into a fresh venv.

The venv is created without pip; a ``.pth`` line adds the test run's own site-packages
(so codemode and its dependencies are importable, as installed), and the test run's pip
installs the plugin wheel into it (``pip --python``). The tests then run ``codemode`` in
that venv as subprocesses: entry points are read from the venv's installed metadata,
exactly as for a user who ran ``pip install acme-codemode``.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
PLUGIN_SRC = HERE / "acme_plugin"


@dataclass
class PluginVenv:
    root: Path
    python: Path
    wheel: Path

    def run(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        input: str | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        full = {**os.environ, **(env or {})}
        return subprocess.run(
            [str(self.python), *args],
            env=full,
            cwd=cwd,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def codemode(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.run("-m", "codemode", *args, **kw)

    def plugins(self, **kw: Any) -> dict[str, dict[str, Any]]:
        out = self.codemode("plugins", "list", "--json", **kw)
        assert out.returncode == 0, out.stderr
        return {p["name"]: p for p in json.loads(out.stdout)}


def build_wheel(dest: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", str(dest), str(PLUGIN_SRC)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    (wheel,) = dest.glob("acme_codemode-1.2.3-*.whl")
    return wheel


def make_venv(root: Path, wheel: Path) -> PluginVenv:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    ours = [p for p in site.getsitepackages() if Path(p).is_dir()]
    line = "import site; " + "; ".join(f"site.addsitedir({p!r})" for p in ours)
    (Path(purelib) / "zz_codemode_test_run.pth").write_text(line + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "-q", str(wheel)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return PluginVenv(root, python, wheel)


@pytest.fixture(scope="session")
def plugin_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PluginVenv]:
    root = tmp_path_factory.mktemp("plugin-venv")
    wheel = build_wheel(root / "dist")
    yield make_venv(root / "venv", wheel)
