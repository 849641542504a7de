"""``codemode serve`` through the official MCP client: round trips and concurrency.

1. ``run_code("x+1")`` over stdio and over streamable HTTP: p50 and p95, next to a bare
   SDK ``MCPServer`` whose no-op tool is called the same way in the same run (the floor
   of the protocol itself). Target: codemode's added p50 <= 0.5 ms. Calls alternate
   between codemode and the floor so that load on the machine hits both alike.
2. 50 concurrent HTTP clients, each running 100 small runs in its own session:
   throughput, p50/p95 and the number of errors (target: none).

    .venv/bin/python benchmarks/bench_server.py [--calls 400] [--clients 50] [--runs 100]
        [--executor sandbox|subprocess|inprocess]   (default: sandbox)

The script is also its own floor server: ``--bare stdio`` / ``--bare http PORT``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stats import pct, table

TOKEN = "bench-token"


# ----------------------------------------------------------------------------- floor


def bare_server() -> Any:
    from mcp.server import MCPServer

    server: Any = MCPServer("bare", log_level="WARNING")

    @server.tool()
    def noop(code: str) -> str:
        """Return the code unchanged: the cheapest tool an SDK server can have."""
        return code

    return server


def run_bare(transport: str, port: int) -> None:
    server = bare_server()
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=port)


# ----------------------------------------------------------------------------- processes


def start(argv: list[str], env: dict[str, str], ready: str) -> tuple[subprocess.Popen[str], str]:
    """Start a server and wait (bounded) for the stderr line matching ``ready``."""
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    found: list[str] = []
    event = threading.Event()

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if not event.is_set() and (m := re.search(ready, line)):
                found.append(m.group(1))
                event.set()
        proc.stderr.close()
        event.set()

    threading.Thread(target=drain, daemon=True).start()
    if not event.wait(60) or not found:
        proc.kill()
        raise SystemExit(f"server did not start: {' '.join(argv)}")
    return proc, found[0]


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# ----------------------------------------------------------------------------- clients


@asynccontextmanager
async def stdio_client(argv: list[str]) -> AsyncIterator[Any]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    async with Client(params, mode="legacy") as client:
        yield client


@asynccontextmanager
async def http_client(url: str, token: str | None = TOKEN) -> AsyncIterator[Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = httpx2.Timeout(60, read=300)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        yield client


Caller = Callable[[], Awaitable[Any]]


async def timed(call: Caller, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        result = await call()
        out.append((time.perf_counter() - t0) * 1000)
        if result.is_error:
            raise SystemExit(f"a benchmark call failed: {result.content}")
    return out


async def alternate(ours: Caller, floor: Caller, calls: int) -> tuple[list[float], list[float]]:
    """Time ``calls`` calls of each, one after the other, so load hits both alike."""
    await timed(ours, 30)
    await timed(floor, 30)
    a: list[float] = []
    b: list[float] = []
    for _ in range(calls):
        a += await timed(ours, 1)
        b += await timed(floor, 1)
    return a, b


def row(name: str, ms: list[float]) -> list[object]:
    return [name, len(ms), pct(ms, 50), pct(ms, 95)]


# ----------------------------------------------------------------------------- scenarios


async def round_trips(args: argparse.Namespace, base: Path) -> list[list[object]]:
    me = [sys.executable, str(Path(__file__).resolve())]
    serve = [sys.executable, "-m", "codemode", "serve", "--base", str(base),
             "--executor", args.executor]  # fmt: skip
    rows: list[list[object]] = []

    # stdio
    async with stdio_client(serve) as cm, stdio_client([*me, "--bare", "stdio"]) as bare:
        await cm.call_tool("run_code", {"code": "x = 1"})
        ours, floor = await alternate(
            lambda: cm.call_tool("run_code", {"code": "x+1"}),
            lambda: bare.call_tool("noop", {"code": "x+1"}),
            args.calls,
        )
    rows += [row("stdio: bare SDK no-op (floor)", floor), row("stdio: codemode run_code", ours)]
    rows.append(["stdio: codemode added p50", "", pct(ours, 50) - pct(floor, 50), ""])

    # HTTP
    env = {**os.environ, "CODEMODE_TOKEN": TOKEN}
    proc, url = start([*serve, "--transport", "http", "--port", "0"], env, r"serving MCP on (\S+)")
    port = free_port()
    bare_proc = subprocess.Popen([*me, "--bare", "http", str(port)], stderr=subprocess.DEVNULL)
    try:
        await wait_http(f"http://127.0.0.1:{port}/mcp")
        async with (
            http_client(url) as cm,
            http_client(f"http://127.0.0.1:{port}/mcp", None) as bare,
        ):
            await cm.call_tool("run_code", {"code": "x = 1"})
            ours, floor = await alternate(
                lambda: cm.call_tool("run_code", {"code": "x+1"}),
                lambda: bare.call_tool("noop", {"code": "x+1"}),
                args.calls,
            )
    finally:
        stop(proc)
        bare_proc.terminate()
        bare_proc.wait(timeout=20)
    rows += [row("http: bare SDK no-op (floor)", floor), row("http: codemode run_code", ours)]
    rows.append(["http: codemode added p50", "", pct(ours, 50) - pct(floor, 50), ""])
    return rows


async def wait_http(url: str) -> None:
    import anyio
    import httpx2

    with anyio.fail_after(30):
        while True:
            try:
                async with httpx2.AsyncClient() as h:
                    await h.get(url)
                return
            except httpx2.HTTPError:
                await anyio.sleep(0.1)


def _stat(pid: int) -> tuple[int, list[str]]:
    """(parent pid, fields after the command name) of one process from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), fields


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a process and all its descendants so far (Linux /proc).

    codemode's work happens in worker processes as much as in the server: each live process
    of the tree adds its own time plus that of the children it has already reaped (workers
    closed during the run), so nothing done under the server is missed.
    """
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid, fields = _stat(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue  # exited while we looked
        stats[int(entry.name)] = fields
        children.setdefault(ppid, []).append(int(entry.name))
    ticks, todo = 0, [pid]
    while todo:
        p = todo.pop()
        f = stats.get(p)
        if f is not None:
            ticks += sum(int(f[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
        todo.extend(children.get(p, []))
    return ticks / os.sysconf("SC_CLK_TCK")


async def hammer(
    url: str, token: str | None, clients: int, runs: int, codemode: bool, pid: int
) -> tuple[list[object], list[str]]:
    """``clients`` MCP clients at once, each making ``runs`` calls; one table row."""
    import anyio

    latencies: list[float] = []
    errors: list[str] = []

    async def one_client(i: int) -> None:
        try:
            async with http_client(url, token) as client:
                if codemode:
                    await client.call_tool("run_code", {"code": f"n = {i}"})
                for _ in range(runs):
                    t0 = time.perf_counter()
                    if codemode:
                        r = await client.call_tool("run_code", {"code": "n = n + 1\nn"})
                    else:
                        r = await client.call_tool("noop", {"code": "n = n + 1\nn"})
                    latencies.append((time.perf_counter() - t0) * 1000)
                    if r.is_error:
                        errors.append(str(r.content[0]))
                # Each client's state is its own: the counter saw only its own runs.
                if codemode and r.structured_content["value"] != i + runs:
                    errors.append(f"client {i}: final value {r.structured_content['value']}")
        except Exception as exc:  # noqa: BLE001 - counted as an error, not a crash
            errors.append(f"client {i}: {type(exc).__name__}: {exc}")

    t0, cpu0 = time.perf_counter(), cpu_seconds(pid)
    async with anyio.create_task_group() as tg:
        for i in range(clients):
            tg.start_soon(one_client, i)
    wall, cpu = time.perf_counter() - t0, cpu_seconds(pid) - cpu0
    name = "codemode run_code" if codemode else "bare SDK no-op (floor)"
    total = len(latencies)
    row = [f"{name}: {clients} x {runs}", total, f"{total / wall:.0f}/s",
           pct(latencies, 50), pct(latencies, 95), cpu * 1000 / max(total, 1),
           len(errors)]  # fmt: skip
    return row, errors


async def concurrency(args: argparse.Namespace, base: Path) -> tuple[list[list[object]], list[str]]:
    me = [sys.executable, str(Path(__file__).resolve())]
    serve = [sys.executable, "-m", "codemode", "serve", "--base", str(base), "--transport",
             "http", "--port", "0", "--executor", args.executor,
             "--max-sessions", str(args.clients + 4)]  # fmt: skip
    env = {**os.environ, "CODEMODE_TOKEN": TOKEN}
    proc, url = start(serve, env, r"serving MCP on (\S+)")
    port = free_port()
    bare_proc = subprocess.Popen([*me, "--bare", "http", str(port)], stderr=subprocess.DEVNULL)
    bare_url = f"http://127.0.0.1:{port}/mcp"
    try:
        await wait_http(bare_url)
        floor, _ = await hammer(
            bare_url, None, args.clients, args.runs, codemode=False, pid=bare_proc.pid
        )
        ours, errors = await hammer(
            url, TOKEN, args.clients, args.runs, codemode=True, pid=proc.pid
        )
    finally:
        stop(proc)
        bare_proc.terminate()
        bare_proc.wait(timeout=20)
    return [floor, ours], errors


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)  # the sandbox's unprivileged uid must reach the workspace
        base = Path(tmp) / "ws"
        rows = await round_trips(args, base)
        print(table(
            f"run_code('x+1') round trip through the MCP client, ms (executor: {args.executor})",
            ["case", "n", "p50", "p95"], rows,
        ))  # fmt: skip
        conc, errors = await concurrency(args, base)
        print(table(
            "concurrent HTTP clients, each in its own session (latency ms)",
            ["case", "calls", "throughput", "p50", "p95", "server+workers CPU ms/call",
             "errors"],
            conc,
        ))  # fmt: skip
        for e in errors[:10]:
            print("error:", e)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--runs", type=int, default=100)
    # the default every entry point has: the sandbox (the others only when asked for)
    parser.add_argument("--executor", default="sandbox",
                        choices=["subprocess", "sandbox", "inprocess"])  # fmt: skip
    return parser.parse_args(argv)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--bare":
        run_bare(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
        raise SystemExit(0)
    import anyio

    anyio.run(main, parse_args())
