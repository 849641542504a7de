"""Typed stub generation: time to generate the ``servers/`` tree.

For all tools of the five real servers (filesystem, memory, everything: npm; time, git:
PyPI; installed by ``.ci/install-test-servers.sh``), and for 10,000 synthetic specs.
Generation time excludes listing (connecting to the servers), reported separately. The
baseline in the same run is ``json.dumps`` of the same schemas (serializing what a
client receives from ``tools/list``).

    .venv/bin/python benchmarks/bench_stubs.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from codemode.config import parse_servers
from codemode.tools import ToolRegistry
from codemode.tools.stubs import generate_tree, server_module_source, stub_tools

REPO = Path(__file__).resolve().parent.parent
NODE = REPO / ".ci" / "node" / "node_modules" / "@modelcontextprotocol"
VENVS = REPO / ".ci" / "venvs"
sys.path.insert(0, str(Path(__file__).resolve().parent))


def real_servers(tmp: Path) -> dict[str, dict[str, object]]:
    files = tmp / "files"
    files.mkdir()
    repo = tmp / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@example.com"]
    subprocess.run([*git, "init", "-q"], check=True, timeout=30)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True, timeout=30)
    return {
        "filesystem": {
            "command": "node",
            "args": [str(NODE / "server-filesystem/dist/index.js"), str(files)],
        },
        "memory": {
            "command": "node",
            "args": [str(NODE / "server-memory/dist/index.js")],
            "env": {"MEMORY_FILE_PATH": str(tmp / "memory.jsonl")},
        },
        "everything": {
            "command": "node",
            "args": [str(NODE / "server-everything/dist/index.js"), "stdio"],
        },
        "time": {
            "command": str(VENVS / "mcp-server-time/bin/python"),
            "args": ["-m", "mcp_server_time"],
        },
        "git": {
            "command": str(VENVS / "mcp-server-git/bin/python"),
            "args": ["-m", "mcp_server_git", "--repository", str(repo)],
        },
    }


def installed() -> bool:
    return (NODE / "server-memory").exists() and (VENVS / "mcp-server-time").exists()


async def time_tree(reg: ToolRegistry, repeat: int) -> tuple[list[float], list[float], int, int]:
    """(tree ms per run, json.dumps baseline ms per run, tools, bytes of source)."""
    items = await reg.stub_items()
    n_tools = sum(len(t) for _, _, t in items)
    tree, base = [], []
    size = sum(len(server_module_source(o, stub_tools(t))) for _, o, t in items)
    schemas = [(s.input_schema, s.output_schema) for _, _, t in items for s, _ in t]
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as out:
            a = time.perf_counter()
            await generate_tree(reg, out)
            tree.append((time.perf_counter() - a) * 1e3)
        a = time.perf_counter()
        json.dumps(schemas)
        base.append((time.perf_counter() - a) * 1e3)
    return tree, base, n_tools, size


def row(label: str, tools: int, size: int, lat: list[float], base: list[float]) -> str:
    p50 = statistics.median(lat)
    p95 = sorted(lat)[int(0.95 * (len(lat) - 1))]
    ratio = p50 / max(statistics.median(base), 1e-9)
    return f"{label:<28} {tools:>6} {size / 1024:>9.0f} {p50:>9.2f} {p95:>9.2f} {ratio:>12.0f}x"


async def main(repeat: int) -> None:
    from bench_discovery import StaticSource, synthetic_specs

    print(
        f"{'stub tree (servers/)':<28} {'tools':>6} {'src KiB':>9} {'p50 ms':>9} "
        f"{'p95 ms':>9} {'vs json.dumps':>13}"
    )
    if installed():
        from codemode.tools.sources.mcp import MCPSource

        with tempfile.TemporaryDirectory() as tmp:
            configs = parse_servers({"mcpServers": real_servers(Path(tmp))}, source="bench", env={})
            reg = ToolRegistry([MCPSource(n, c) for n, c in configs.items()])
            try:
                a = time.perf_counter()
                await reg.list()
                listing = (time.perf_counter() - a) * 1e3
                tree, base, n, size = await time_tree(reg, repeat)
                print(row("five real servers", n, size, tree, base))
            finally:
                await reg.aclose()
    else:
        listing = float("nan")
        print("five real servers: not installed (run .ci/install-test-servers.sh)")
    specs = synthetic_specs(10_000)
    by: dict[str, list] = {}  # type: ignore[type-arg]
    for s in specs:
        by.setdefault(s.server, []).append(s)
    reg = ToolRegistry([StaticSource(k, v) for k, v in by.items()])
    tree, base, n, size = await time_tree(reg, max(3, repeat // 5))
    print(row("10,000 synthetic specs", n, size, tree, base))
    print()
    print(
        "listing the five real servers (spawn + connect + tools/list, not in the figures "
        f"above): {listing:.0f} ms"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=20)
    asyncio.run(main(ap.parse_args().repeat))
