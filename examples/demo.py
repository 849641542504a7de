"""A visible tour of code mode on the embedded default (sandbox executor, file storage).

    bash scripts/demo.sh          # sets everything up, then runs this

It builds a throwaway workspace whose mcp.json connects two real MCP servers (the
filesystem server over a 5,000-row CSV, and the time server), then plays the agent's
part: discover tools, write code that filters data inside the sandbox, save a skill and
reuse it from a new session, keep an artifact, and watch the guardrails work.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

from _support import REPO, banner
from _support import show as show_checked

from codemode import Session

FS_SERVER = REPO / ".ci/node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
TIME_PY = REPO / ".ci/venvs/mcp-server-time/bin/python"
show = functools.partial(show_checked, check=False)  # failures are part of the tour


def make_workspace(root: Path) -> Path:
    base = root / "workspace"
    files = base / "files"
    files.mkdir(parents=True)
    rng = random.Random(7)
    regions = ["north", "south", "east", "west"]
    lines = ["id,customer,region,amount"]
    for i in range(5000):
        lines.append(f"{i},customer-{i:04d},{rng.choice(regions)},{rng.randint(10, 99_000)}")
    (files / "sales.csv").write_text("\n".join(lines) + "\n")
    servers: dict[str, dict[str, object]] = {}
    if FS_SERVER.exists():
        servers["files"] = {"command": "node", "args": [str(FS_SERVER), str(files)]}
    if TIME_PY.exists():
        servers["time"] = {"command": str(TIME_PY), "args": ["-m", "mcp_server_time"]}
    if not servers:
        sys.exit("demo: run `bash scripts/setup.sh` first (it installs the MCP servers)")
    (base / "mcp.json").write_text(json.dumps({"mcpServers": servers}, indent=2))
    return base


async def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="codemode-demo-"))
    root.chmod(0o755)  # the sandbox's unprivileged uid must reach the workspace
    try:
        base = make_workspace(root)
        names = ", ".join(json.loads((base / "mcp.json").read_text())["mcpServers"])
        banner(f"workspace {base} with MCP servers: {names}")
        async with Session.from_base(base) as s:
            print(f"  executor: {type(s.executor).__name__}")

            banner("1. Progressive discovery: search tools by need, at a chosen detail")
            await show(
                s,
                "for hit in tools.search('read a text file', detail='name', limit=3):\n"
                "    print(hit)",
            )
            await show(s, "print(tools.describe('files.read_text_file')['signature'])")

            banner("2. Filter data inside the sandbox; only the summary reaches the model")
            csv_path = str(base / "files" / "sales.csv")
            r = await show(
                s,
                f"""
raw = tools.files.read_text_file(path={csv_path!r})
text = raw["content"]"""
                + """
rows = [line.split(",") for line in text.splitlines()[1:]]
big = sorted((r for r in rows if int(r[3]) > 98_000), key=lambda r: -int(r[3]))
print(f"{len(rows)} rows read ({len(text):,} characters), {len(big)} deals over 98,000:")
for r in big[:5]:
    print("  ", r[1], r[2], r[3])
""",
            )
            if r.is_ok:
                chars = (await s.run("len(text)")).value
                print(f"  -> the model saw {len(r.stdout):,} characters instead of {chars:,}")

            banner("3. Several tool calls at once, from one run")
            if TIME_PY.exists():
                await show(
                    s,
                    """
import asyncio
zones = ["Europe/Paris", "Asia/Tokyo", "America/New_York"]
times = await asyncio.gather(*(tools.time.get_current_time.aio(timezone=z) for z in zones))
for z, t in zip(zones, times):
    print(z, t["datetime"][11:16])
""",
                )

            banner("4. Save what worked as a skill")
            await show(
                s,
                '''
skills.create("top_deals", """
def run(min_amount: int = 90000, limit: int = 3):
    text = tools.files.read_text_file(path=CSV)["content"]
    rows = [l.split(",") for l in text.splitlines()[1:]]
    rows = [r for r in rows if int(r[3]) >= min_amount]
    return sorted(rows, key=lambda r: -int(r[3]))[:limit]
""", description="The largest deals in sales.csv above a minimum amount")
artifacts.save("regions", {"regions": ["north", "south", "east", "west"]}, description="demo")
print("saved")
'''.replace("CSV", repr(csv_path)),
            )

        banner("5. A new session finds the skill by search and reuses it")
        async with Session.from_base(base) as s2:
            await show(
                s2,
                "print(skills.search('largest deals')[0]['name'])\n"
                "skills.top_deals(min_amount=95000, limit=2)",
            )
            await show(s2, "artifacts.load('regions')")

            banner("6. Guardrails: no network, no host files, runaway code is stopped")
            await show(
                s2,
                "import socket\n"
                "try:\n"
                "    socket.create_connection(('1.1.1.1', 80), timeout=2)\n"
                "except OSError as e:\n"
                "    print('network blocked:', e)",
            )
            await show(
                s2,
                "import os\n"
                "print(sorted(os.listdir('/')))\n"
                "print(os.path.exists('/root'), os.path.exists('/etc/shadow'))",
            )
            await show(s2, "while True:\n    pass", timeout=1)
            await show(s2, "'still alive: ' + str(1 + 1)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
