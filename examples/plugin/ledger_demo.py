"""A plugin of one's own in the tool-call chain: the ``codemode-ledger`` package beside this.

    .venv/bin/python examples/plugin/ledger_demo.py

If the plugin is not installed (``pip install examples/plugin`` installs it for good),
the demo installs it into a throwaway folder and runs itself again with that folder on
``PYTHONPATH``: codemode finds it the way it finds any plugin, through its entry point.
The demo then shows ``codemode plugins list``, runs a custom workflow that ends with the
plugin's own step type (``audit_files.yaml``), lets code call a real filesystem server,
and reads the ledger the plugin kept of all those calls, from the code, as ``tools.ledger``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # examples/_support.py

from _support import banner, make_workspace, npm_server, scratch, show

from codemode import Session
from codemode.workflows import arun_workflow

PLUGIN = Path(__file__).resolve().parent


def installed() -> bool:
    return bool(metadata.entry_points(group="codemode.plugins", name="ledger"))


def install_and_rerun(root: Path) -> int:
    """Install the plugin into ``root/site`` with pip and run this demo again there."""
    site = root / "site"
    banner("Installing codemode-ledger into a throwaway folder (pip install --target)")
    isolation = [] if importlib.util.find_spec("hatchling") is None else ["--no-build-isolation"]
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", *isolation,
         "--target", str(site), str(PLUGIN)],
        check=True,
    )  # fmt: skip
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, __file__], env=env, check=False).returncode


async def demo(root: Path) -> None:
    banner("codemode plugins list")
    listing = subprocess.run(
        [sys.executable, "-m", "codemode", "plugins", "list"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    print("  " + listing.stdout.strip().replace("\n", "\n  "))

    data = root / "data"
    data.mkdir()
    for name, text in {"a.txt": "alpha\n", "b.txt": "beta " * 200 + "\n"}.items():
        (data / name).write_text(text)
    base = make_workspace(root, {"files": npm_server("server-filesystem", str(data))})
    banner("A custom workflow whose last step is the plugin's `ledger` step type")
    run = await arun_workflow(PLUGIN / "audit_files.yaml", base=base, inputs={"root": str(data)})
    print(f"  status={run.status}")
    if run.status != "succeeded":
        raise SystemExit(f"the workflow failed: {run.error}")
    for row in run.result:
        print(f"  {row['tool']:<24} calls={row['calls']} failed={row['failed']}")

    async with Session.from_base(base) as s:
        banner("The agent's code calls tools; the plugin's layer records each call")
        await show(
            s,
            f"folder = {str(data)!r}\n"
            "names = [l.split()[-1] for l in tools.files.list_directory(path=folder)['content']"
            ".splitlines()]\n"
            "for name in names:\n"
            "    tools.files.read_text_file(path=f'{folder}/{name}')\n"
            "try:\n"
            "    tools.files.read_text_file(path=f'{folder}/missing.txt')\n"
            "except Exception as e:\n"
            "    print('caught', type(e).__name__)\n"
            "print('read', names)",
        )
        banner("The plugin's own tools read the ledger (workflow and session), from the code")
        await show(
            s,
            "for row in tools.ledger.report():\n"
            "    print(f\"{row['tool']:<24} calls={row['calls']} failed={row['failed']}"
            " bytes={row['bytes']}\")",
        )

    banner("The workflow again: the ledger now holds a failed call, so its last step fails")
    again = await arun_workflow(PLUGIN / "audit_files.yaml", base=base, inputs={"root": str(data)})
    print(f"  status={again.status}: {again.error}")


def main() -> int:
    with scratch("plugin") as root:
        if not installed():
            return install_and_rerun(root)
        asyncio.run(demo(root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
