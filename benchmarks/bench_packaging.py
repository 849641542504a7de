"""Packaging check: build the wheel, install it in clean venvs, smoke-test, measure.

For the working tree (and, for comparison, a baseline release built the same way):

1. ``pip wheel`` the project; install the wheel alone in a fresh venv (the minimal
   install) and run a smoke session there: ``from codemode import ...``, a run on the
   subprocess executor with a Python tool and file storage, then the sandbox when this
   machine has one; check that ``RedisStorage()`` names the extra it needs;
2. install each extra (``redis``, ``bench``, ``plot``, ``otel``) and check what it brings works;
3. print ``import codemode`` time (median and p95 of N fresh interpreters, minus an empty
   interpreter's start) and the installed size (site-packages beyond an empty venv's),
   for the baseline and the working tree.

``--quick`` (what CI runs) installs the extras one after the other into the minimal venv
and measures 5 imports; the full mode gives each extra a fresh venv and measures 20.
Needs the package index (or pip's cache): the venvs install real dependencies.

    .venv/bin/python benchmarks/bench_packaging.py --quick
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from dataclasses import dataclass, field
from pathlib import Path

from _stats import median, pct, table

REPO = Path(__file__).resolve().parents[1]
BASELINE = "c4be338"  # main before the layout work (codemode 0.1.0 as first released)
EXTRAS = ("redis", "bench", "plot", "otel")

SMOKE = r"""
import asyncio, sys, tempfile
from codemode import (ConfigError, FileStorage, RedisStorage, SandboxUnavailable, Session,
                      SubprocessExecutor, ExecutorError)

def double(n: int) -> int:
    "Twice n."
    return 2 * n

async def run(executor):
    storage = FileStorage(base_path=tempfile.mkdtemp())
    async with Session(executor, storage=storage) as s:
        s.register_tool(double, server="math")
        r = await s.run("state.set('k', 1)\ntools.math.double(n=21)", timeout=60)
        assert r.is_ok and r.value == 42, r

async def main():
    await run(SubprocessExecutor())
    print("subprocess session: ok")
    try:
        from codemode import SandboxExecutor
        await run(SandboxExecutor())
        print("sandbox session: ok")
    except (SandboxUnavailable, ExecutorError) as exc:
        print("sandbox session: unavailable here:", str(exc).splitlines()[0])
    try:
        RedisStorage(url="redis://127.0.0.1:6379/0", prefix="x")
        print("RedisStorage: the redis extra is installed")
    except ConfigError as exc:
        assert "codemode[redis]" in str(exc), exc
        print("RedisStorage: names its extra:", exc)
    import importlib.util
    if importlib.util.find_spec("ray") is None:  # never start a Ray here
        from codemode.execution import executor_by_name
        try:
            await executor_by_name("ray").start(None)
        except ConfigError as exc:
            assert "codemode[ray]" in str(exc), exc
            print("executor ray: names its extra:", exc)

asyncio.run(main())
"""

BASELINE_SMOKE = r"""
import asyncio
from codemode import Session, SubprocessExecutor
async def main():
    async with Session(SubprocessExecutor()) as s:
        assert (await s.run("1 + 1")).value == 2
    print("subprocess session: ok")
asyncio.run(main())
"""

EXTRA_CHECKS = {
    "redis": "from codemode import RedisStorage; RedisStorage(url='redis://x:1/0', prefix='p')",
    "bench": "import tiktoken; from codemode.bench import tokens",
    "plot": "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot",
    "otel": "from codemode.observability.tracing import Tracing; "
    "from codemode.observability.providers import exporting_provider; "
    "Tracing(exporting_provider('otlp', 'codemode', 'http://127.0.0.1:9/v1/traces'))",
}


@dataclass
class Measure:
    label: str
    wheel_kb: float = 0.0
    site_mb: float = 0.0
    import_ms: list[float] = field(default_factory=list)
    session_import_ms: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def sh(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"failed: {' '.join(map(str, args))}\n{out.stdout}\n{out.stderr}")
    return out.stdout


def build_wheel(source: Path, out: Path) -> Path:
    sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, source)
    [wheel] = sorted(out.glob("codemode-*.whl"))
    return wheel


def make_venv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path / "bin" / "python"


def site_size(python: Path) -> int:
    site = sh(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    total = 0
    for root, _, files in os.walk(site):
        for name in files:
            total += os.lstat(os.path.join(root, name)).st_size
    return total


def pip_install(python: Path, *reqs: str) -> None:
    sh(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *reqs)


def timed(python: Path, code: str, runs: int) -> list[float]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([str(python), "-c", code], env=env, check=True)
        out.append((time.perf_counter() - start) * 1000)
    return out


def measure(label: str, wheel: Path, work: Path, empty: int, runs: int, smoke: str) -> Measure:
    m = Measure(label, wheel_kb=wheel.stat().st_size / 1024)
    python = make_venv(work / f"venv-{label}")
    pip_install(python, str(wheel))
    m.site_mb = (site_size(python) - empty) / 1e6
    floor = median(timed(python, "pass", runs))
    m.import_ms = [t - floor for t in timed(python, "import codemode", runs)]
    code = "from codemode import Session, SubprocessExecutor"
    m.session_import_ms = [t - floor for t in timed(python, code, runs)]
    m.notes += sh(python, "-c", smoke, cwd=work).splitlines()
    return m


def extras(wheel: Path, work: Path, quick: bool) -> list[tuple[str, str]]:
    rows = []
    shared = work / "venv-current"
    for extra in EXTRAS:
        python = shared / "bin" / "python" if quick else make_venv(work / f"venv-{extra}")
        start = time.perf_counter()
        pip_install(python, f"{wheel}[{extra}]")
        sh(python, "-c", EXTRA_CHECKS[extra], cwd=work)
        rows.append((extra, f"ok ({time.perf_counter() - start:.0f} s to install and check)"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="CI mode: one venv for the extras")
    ap.add_argument("--baseline", default=BASELINE, help="git ref to compare with ('' for none)")
    ap.add_argument("--keep", type=Path, help="build in this directory and keep it")
    args = ap.parse_args()
    runs = 5 if args.quick else 20
    work = args.keep or Path(tempfile.mkdtemp(prefix="cm-pkg-"))
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)  # the sandbox's unprivileged uid must reach the venv's worker package
    started = time.perf_counter()
    try:
        empty_python = make_venv(work / "venv-empty")
        empty = site_size(empty_python)
        results = []
        if args.baseline:
            src = work / "baseline-src"
            shutil.rmtree(src, ignore_errors=True)
            src.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(REPO), "archive", args.baseline], capture_output=True
            )
            if archive.returncode == 0:
                subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
                wheel = build_wheel(src, work / "dist-baseline")
                results.append(measure("baseline", wheel, work, empty, runs, BASELINE_SMOKE))
            else:
                print(f"(baseline {args.baseline} is not in this clone: skipped)")
        wheel = build_wheel(REPO, work / "dist-current")
        results.append(measure("current", wheel, work, empty, runs, SMOKE))
        extra_rows = extras(wheel, work, args.quick)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    rows = [
        (
            f"{m.label}" + (f" ({args.baseline})" if m.label == "baseline" else ""),
            round(m.wheel_kb, 1),
            round(m.site_mb, 1),
            median(m.import_ms),
            pct(m.import_ms, 95),
            median(m.session_import_ms),
        )
        for m in results
    ]
    headers = [
        "build",
        "wheel KB",
        "installed MB",
        "import codemode ms (median)",
        "p95",
        "import Session ms (median)",
    ]
    print(table(f"minimal install, {runs} fresh interpreters each", headers, rows))
    if len(results) == 2:
        base, cur = results
        print(
            f"ratio current/baseline: installed size {cur.site_mb / base.site_mb:.2f}, "
            f"import codemode {median(cur.import_ms) / median(base.import_ms):.2f}"
        )
    for m in results:
        for note in m.notes:
            print(f"  {m.label}: {note}")
    print(table("extras (pip install 'codemode[extra]')", ["extra", "result"], extra_rows))
    print(f"\ntotal {time.perf_counter() - started:.0f} s (load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
