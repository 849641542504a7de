"""Snapshot ``tools/list`` of real MCP servers from npm and PyPI into ``catalog/``.

Each server in ``servers.json`` is installed into a scratch folder (npm: one prefix per
package; PyPI: one venv per package, their pins clash), started over stdio (``HOME`` in a
temporary folder) with dummy credentials where it insists on some, and asked for its
tools. The snapshot records the package's registry, name and installed version, the
command and the (dummy) environment, the server's own name, version and instructions, and
every tool exactly as listed. Only the snapshots are committed, never the packages.

    python benchmarks/discovery/snapshot.py --scratch /var/tmp/mcpcat [--install] [--only NAME]

Servers that fail to install or start are reported and skipped; their snapshot (if any)
is left as it was.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "servers.json"
CATALOG = HERE / "catalog"
TIMEOUT = 60.0


def prefix_of(scratch: Path, entry: dict[str, Any]) -> Path:
    slug = entry["package"].replace("/", "_").replace("@", "_")
    return scratch / entry["registry"] / slug


def install(scratch: Path, entry: dict[str, Any]) -> None:
    """Install one package (idempotent); browsers and native post-install steps are skipped."""
    where = prefix_of(scratch, entry)
    pkg = entry["package"]
    where.mkdir(parents=True, exist_ok=True)
    if entry["registry"] == "npm":
        if (where / "node_modules" / pkg / "package.json").is_file():
            return
        skip = {"PUPPETEER_SKIP_DOWNLOAD": "1", "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
        env = {**os.environ, **skip}
        subprocess.run(
            ["npm", "install", "--prefix", str(where), "--no-audit", "--no-fund",
             "--ignore-scripts", pkg],
            check=True, env=env, capture_output=True, timeout=900,
        )  # fmt: skip
        return
    if not (where / "bin" / "python").is_file():
        subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    subprocess.run(
        [str(where / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", pkg],
        check=True, capture_output=True, timeout=1800,
    )  # fmt: skip


def installed_version(scratch: Path, entry: dict[str, Any]) -> str:
    where = prefix_of(scratch, entry)
    if entry["registry"] == "npm":
        meta = json.loads((where / "node_modules" / entry["package"] / "package.json").read_text())
        return str(meta["version"])
    out = subprocess.run(
        [str(where / "bin" / "python"), "-c",
         "import sys, importlib.metadata as m; print(m.version(sys.argv[1]))", entry["package"]],
        check=True, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return out.stdout.strip()


def command(scratch: Path, entry: dict[str, Any], work: Path) -> tuple[str, list[str]]:
    """(executable, args) that start the server; ``{work}`` in args is a scratch folder."""
    where = prefix_of(scratch, entry)
    args = [a.replace("{work}", str(work)) for a in entry.get("args", [])]
    if entry["registry"] == "npm":
        meta = json.loads((where / "node_modules" / entry["package"] / "package.json").read_text())
        bins = meta["bin"]
        rel = bins if isinstance(bins, str) else bins[entry.get("bin") or next(iter(bins))]
        return "node", [str(where / "node_modules" / entry["package"] / rel), *args]
    if "module" in entry:
        return str(where / "bin" / "python"), ["-m", entry["module"], *args]
    return str(where / "bin" / entry["bin"]), args


async def list_tools(exe: str, args: list[str], env: dict[str, str], log: Path) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=exe, args=args, env={**os.environ, **env})
    with log.open("w") as errlog, anyio.fail_after(TIMEOUT):
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            tools: list[dict[str, Any]] = []
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor)
                tools += [t.model_dump(mode="json", by_alias=True, exclude_none=True)
                          for t in page.tools]  # fmt: skip
                cursor = page.next_cursor
                if cursor is None:
                    break
            info = client.server_info
            return {
                "server_info": info.model_dump(mode="json", exclude_none=True) if info else None,
                "instructions": client.instructions,
                "tools": tools,
            }


def snapshot(scratch: Path, entry: dict[str, Any]) -> dict[str, Any]:
    log = scratch / "logs" / f"{entry['name']}.stderr"
    log.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mcpsnap-") as tmp:
        exe, args = command(scratch, entry, Path(tmp))
        try:
            env = {k: v.replace("{work}", tmp) for k, v in entry.get("env", {}).items()}
            listed = anyio.run(list_tools, exe, args, {"HOME": tmp, **env}, log)
        except Exception as exc:  # noqa: BLE001 - re-raised with the server's stderr
            tail = log.read_text(errors="replace")[-600:] if log.is_file() else ""
            while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
                exc = exc.exceptions[0]
            raise RuntimeError(f"{exc!r}; stderr: {tail}") from None
    return {
        "name": entry["name"],
        "registry": entry["registry"],
        "package": entry["package"],
        "version": installed_version(scratch, entry),
        "args": entry.get("args", []),
        "env": entry.get("env", {}),
        "note": entry.get("note", ""),
        "snapshot_date": dt.date.today().isoformat(),
        **listed,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scratch", type=Path, required=True, help="where packages are installed")
    p.add_argument("--install", action="store_true", help="install missing packages first")
    p.add_argument("--only", action="append", help="snapshot only this server (repeatable)")
    a = p.parse_args()
    entries = json.loads(MANIFEST.read_text())["servers"]
    CATALOG.mkdir(exist_ok=True)
    ok = failed = 0
    for entry in entries:
        if a.only and entry["name"] not in a.only:
            continue
        try:
            if a.install:
                install(a.scratch, entry)
            snap = snapshot(a.scratch, entry)
        except Exception as exc:  # noqa: BLE001 - one broken server must not stop the others
            failed += 1
            print(f"FAIL {entry['name']} ({entry['package']}): {type(exc).__name__}: {exc}"[:400])
            continue
        if not snap["tools"]:
            failed += 1
            print(f"FAIL {entry['name']}: listed no tools")
            continue
        out = CATALOG / f"{entry['name']}.json"
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(snap, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
        tmp.replace(out)
        ok += 1
        print(f"ok   {entry['name']:<28} {snap['package']}=={snap['version']}: "
              f"{len(snap['tools'])} tools")  # fmt: skip
    print(f"{ok} snapshots written, {failed} failed")


if __name__ == "__main__":
    main()
