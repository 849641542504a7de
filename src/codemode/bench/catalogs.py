"""The servers each scenario connects: the benchmark's own, real ones, and catalogs.

- the *realistic* catalog: the benchmark's five servers next to the five real servers the
  tests install (what a user's ``mcp.json`` looks like);
- the *wide* catalog: generated servers of 20 tools each (``catalog_server.py``);
- the *article* catalog: real MCP servers' tool definitions, replayed from the
  ``tools/list`` snapshots of ``benchmarks/discovery/catalog`` (``replay_server.py``).

A catalog is an ``mcpServers`` mapping: ``{name: {"command", "args", "env"}}``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codemode.bench.tokens import REPO_ROOT, BenchError, count_tokens, tool_definition


def servers_dir() -> Path:
    """The benchmark's own MCP servers (``benchmarks/tokens/servers`` of a repo checkout)."""
    env = os.environ.get("CODEMODE_BENCH_SERVERS")
    path = Path(env) if env else REPO_ROOT / "benchmarks" / "tokens" / "servers"
    if not (path / "benchdata.py").is_file():
        raise BenchError(
            f"benchmark servers not found in {path}; run from a codemode repo checkout or set "
            "CODEMODE_BENCH_SERVERS to its benchmarks/tokens/servers folder"
        )
    return path


@dataclass(frozen=True)
class Sizes:
    """Scenario sizes; the defaults are the published benchmark, tests use small ones."""

    words: int = 10_000
    rows: int = 10_000
    polls: int = 8
    customers: int = 100
    catalog_servers: int = 50
    catalog_small_servers: int = 5
    real_servers: bool = True
    article_words: int = 25_000
    article_tools: int = 1_000
    article_servers: int = 20


QUICK = Sizes(
    words=2_000,
    rows=500,
    polls=3,
    customers=10,
    catalog_servers=10,
    catalog_small_servers=5,
    article_words=2_000,
    article_tools=100,
    article_servers=3,
)
"""Small sizes for smoke runs and tests; their figures are not the published ones."""


def bench_server(script: str, *args: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(servers_dir() / script), *args]}


def real_servers(scratch: Path) -> dict[str, dict[str, Any]]:
    """The five real third-party servers of the tools issue, where ``.ci`` installed them."""
    ci = REPO_ROOT / ".ci"
    node_mods = ci / "node" / "node_modules" / "@modelcontextprotocol"
    out: dict[str, dict[str, Any]] = {}
    root = scratch / "files"
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.txt").write_text("Scratch folder for the filesystem server.\n")
    node = "node"
    if (node_mods / "server-filesystem").is_dir():
        out["filesystem"] = {
            "command": node,
            "args": [str(node_mods / "server-filesystem" / "dist" / "index.js"), str(root)],
        }
    if (node_mods / "server-memory").is_dir():
        out["memory"] = {
            "command": node,
            "args": [str(node_mods / "server-memory" / "dist" / "index.js")],
            "env": {"MEMORY_FILE_PATH": str(scratch / "memory.jsonl")},
        }
    if (node_mods / "server-everything").is_dir():
        out["everything"] = {
            "command": node,
            "args": [str(node_mods / "server-everything" / "dist" / "index.js"), "stdio"],
        }
    for name, module in (("time", "mcp_server_time"), ("git", "mcp_server_git")):
        python = ci / "venvs" / f"mcp-server-{name}" / "bin" / "python"
        if python.is_file():
            out[name] = {"command": str(python), "args": ["-m", module]}
    return out


def realistic_catalog(sizes: Sizes, scratch: Path) -> dict[str, dict[str, Any]]:
    """The benchmark's five servers next to the real ones: what a user's mcp.json looks like."""
    servers = {
        "docs": bench_server("docs_server.py", "--words", str(sizes.words)),
        "crm": bench_server("crm_server.py"),
        "sheets": bench_server("sheet_server.py", "--rows", str(sizes.rows)),
        "jobs": bench_server("jobs_server.py", "--polls", str(sizes.polls)),
        "customers": bench_server("customers_server.py", "--customers", str(sizes.customers)),
    }
    if sizes.real_servers:
        servers.update(real_servers(scratch))
    return servers


def load_benchdata() -> Any:
    """The servers' data module, loaded by path (it is not part of the installed package)."""
    path = servers_dir() / "benchdata.py"
    spec = importlib.util.spec_from_file_location("codemode_bench_benchdata", path)
    if spec is None or spec.loader is None:
        raise BenchError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wide_catalog(n_servers: int) -> dict[str, dict[str, Any]]:
    """``n_servers`` generated servers of 20 tools each; the task's two are always included."""
    benchdata = load_benchdata()
    small: list[str] = list(benchdata.CATALOG_SMALL)
    domains = small + [d[0] for d in benchdata.CATALOG_DOMAINS if d[0] not in small]
    return {d: bench_server("catalog_server.py", d) for d in domains[:n_servers]}


def snapshots_dir() -> Path:
    return REPO_ROOT / "benchmarks" / "discovery" / "catalog"


def _tokens_per_tool(snapshot: dict[str, Any]) -> float:
    tools = snapshot["tools"]
    defs = [tool_definition(t["name"], t.get("description"), t["inputSchema"]) for t in tools]
    return sum(count_tokens(json.dumps(d, ensure_ascii=False)) for d in defs) / len(tools)


def article_catalog(min_tools: int, min_servers: int) -> tuple[dict[str, dict[str, Any]], int]:
    """Replayed real servers with at least ``min_tools`` tools on ``min_servers`` servers.

    Servers are taken in order of their definitions' size per tool, smallest first, so the
    direct side is the smallest such a catalog can be (the choice never flatters code
    mode). Returns the catalog and its tool count.
    """
    snaps = []
    for path in sorted(snapshots_dir().glob("*.json")):
        snap = json.loads(path.read_text())
        snaps.append((_tokens_per_tool(snap), snap["name"], len(snap["tools"]), path))
    snaps.sort()
    catalog: dict[str, dict[str, Any]] = {}
    n_tools = 0
    for _, name, count, path in snaps:
        if n_tools >= min_tools and len(catalog) >= min_servers:
            break
        catalog[name] = bench_server("replay_server.py", str(path))
        n_tools += count
    if n_tools < min_tools or len(catalog) < min_servers:
        raise BenchError(
            f"the snapshots in {snapshots_dir()} hold {n_tools} tools on {len(catalog)} "
            f"servers; the article scenario needs {min_tools} on {min_servers}"
        )
    return catalog, n_tools
