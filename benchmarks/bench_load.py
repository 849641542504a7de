"""``codemode serve`` under load, beside a bare MCP SDK server, with the official client.

For each number of concurrent sessions (default 50, 200 and 500), both servers are
started over streamable HTTP on loopback and driven the same way: clients in several
processes each open their MCP sessions, wait for a common start, then every session
makes ``--runs`` calls one after the other: ``run_code`` (codemode) or ``echo`` (a bare
SDK ``MCPServer`` whose one tool returns its argument: the floor of the protocol).

What is measured is codemode, not cold starts: the warm pool holds ``--pool`` pre-started
workers (>= 50) before timing (the timing starts once the server and its workers are
idle: every pre-started worker has booted), ``--max-sessions`` is at least 500 so nobody
waits, and a "busy" answer counts as an error. A thread polls ``/healthz`` all along.
Sessions beyond the pool start cold, on demand: at 200 and 500 sessions their first call
includes a worker's boot.

Reported per row: calls/s, latency p50/p95/p99, first-call latency, errors, hung
sessions (one answer took longer than ``--hang`` s), CPU per call of the server, its
workers and the client processes, server RSS and the workers' RSS at the end (all
sessions still open), the slowest ``/healthz`` answer, and the load average at the start
and end of the row.

The first call is each session's first ``run_code`` (codemode starts the session then:
it takes a warm worker and runs its first cell; the call that used to wait for a cold
worker start), or its first ``echo``. Every session has already initialized and listed
its tools; all of them send their first call at the same instant, so the first calls are
a burst of ``--sessions`` concurrent calls, and on a small machine their p95 is mostly
the time the server and the clients (which share its cores) take for the whole burst.
Each session's second call follows its first at once, with every session started and
as many calls in flight: first p95 minus second p95 is about what starting a session
adds, beside the bare server's same difference.

Where the first and second calls' time goes (a table of its own): both servers write
each request's instants (it reached the app, its answer's last data left the app) and
each client each call's (it began, its POST left httpx, it returned), on one clock
(``_timing``): client-observed = client before send + to the server app + server-side +
back to the client. The server-side first call is also a column of the main table,
beside the client-observed one it is part of.

Then the graceful stop: SIGTERM while ``--stop-calls`` calls of ``--stop-seconds`` s
run; how many finish, exit status, stop time, what is left behind.
Goals (issue 13): 500 sessions with 0 errors; at 50 sessions codemode's throughput
>= 70 % of the bare server's and p99 <= 10x p50; first call p95 <= 100 ms at 50 sessions.

    .venv/bin/python benchmarks/bench_load.py [--sessions 50,200,500] [--runs 20]
        [--procs 4] [--pool 64] [--executor sandbox|subprocess] [--hang 300]
        [--stop-calls 10] [--stop-seconds 3] [--quick] [--json FILE]

``--quick`` (CI): 10 sessions x 5 runs, 2 client processes, pool 10, 4 calls at the stop.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _burst import BurstCpu
from _stats import pct, table
from _timing import LOG_ENV, first_calls, read_log

TOKEN = "bench-load-token"
ME = Path(__file__).resolve()


# ----------------------------------------------------------------------------- servers


def bare_server_main(port: int) -> None:
    """The floor: an SDK server with one echo tool, served by uvicorn like codemode.

    Served as ``MCPServer.run("streamable-http")`` serves it (its app, uvicorn's default
    settings), with the request log (``_timing``) outermost like codemode's."""
    import anyio
    import uvicorn
    from mcp.server import MCPServer

    from _timing import RequestLog, open_log

    server = MCPServer("bare", log_level="WARNING")

    @server.tool()
    async def echo(text: str) -> str:
        """Return the text unchanged (async, like codemode's tools: no thread hop)."""
        return text

    app = server.streamable_http_app(host="127.0.0.1")
    out = open_log()
    if out is not None:
        app.add_middleware(RequestLog, out=out)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    anyio.run(uvicorn.Server(config).serve)


@dataclass
class Server:
    proc: subprocess.Popen[str]
    url: str
    token: str | None
    lines: list[str] = field(default_factory=list)
    health: str | None = None
    """The health port's /healthz (answered off the event loop), when there is one."""
    log: str | None = None
    """Where the server writes its requests' instants (``_timing``)."""

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.log is not None:
            Path(self.log).unlink(missing_ok=True)


def _drain(proc: subprocess.Popen[str], lines: list[str], found: threading.Event) -> None:
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append(line)
        if "serving MCP on" in line or "Uvicorn running" in line:
            found.set()
    found.set()


def _log_file() -> str:
    fd, path = tempfile.mkstemp(prefix="bench-load-", suffix=".jsonl")
    os.close(fd)
    return path


def start_codemode(base: Path, args: argparse.Namespace, sessions: int) -> Server:
    """``codemode serve`` (through ``_timing.serve_codemode``: with the request log)."""
    argv = [sys.executable, str(ME), "--serve-codemode", "--base", str(base),
            "--transport", "http", "--port", "0", "--executor", args.executor,
            "--max-sessions", str(max(sessions, 500)), "--pool-size", str(args.pool),
            "--idle-timeout", "0", "--health-port", "0"]  # fmt: skip
    log = _log_file()
    env = {**os.environ, "CODEMODE_TOKEN": TOKEN, LOG_ENV: log}
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    found = threading.Event()
    threading.Thread(target=_drain, args=(proc, lines, found), daemon=True).start()
    found.wait(300)
    m = next((re.search(r"serving MCP on (\S+)", x) for x in lines if "serving" in x), None)
    if m is None:
        proc.kill()
        raise SystemExit("codemode serve did not start:\n" + "".join(lines[-20:]))
    h = next((re.search(r"health on (\S+)", x) for x in lines if "health on" in x), None)
    return Server(proc, m.group(1), TOKEN, lines, h.group(1) if h else None, log)


def start_bare() -> Server:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = _log_file()
    proc = subprocess.Popen(
        [sys.executable, str(ME), "--bare", str(port)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, LOG_ENV: log},
    )
    lines: list[str] = []
    threading.Thread(target=_drain, args=(proc, lines, threading.Event()), daemon=True).start()
    url = f"http://127.0.0.1:{port}/mcp"
    _wait_http(url)
    return Server(proc, url, None, lines, log=log)


def _wait_http(url: str) -> None:
    import httpx2

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx2.get(url, timeout=5)
            return
        except httpx2.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not answer")


# ----------------------------------------------------------------------------- memory


def _rss_kb(pid: int, key: str = "VmRSS") -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pid: int, *, idle: float = 0.25, limit: float = 120.0) -> None:
    """Wait (bounded) until the server and its workers use less than ``idle`` of a core
    over a second: the warm pool's workers have booted and the sessions are open."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        procs = [pid, *_children(pid)]
        before = sum(_cpu_s(p) for p in procs)
        time.sleep(1.0)
        if sum(_cpu_s(p) for p in procs) - before < idle:
            return


def _live(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: it holds nothing but its pid)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _children(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            parents[int(entry.name)] = int(fields[1])
    out, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        kids = [p for p, pp in parents.items() if pp == parent]
        out += kids
        frontier += kids
    return out


# ----------------------------------------------------------------------------- health


class HealthProbe(threading.Thread):
    """Polls ``/healthz`` every 100 ms and keeps each answer's latency (the bare server
    has none: its 404 costs it about as much, so both carry the same extra load).
    ``url`` is the MCP endpoint's (``/healthz`` beside it) or a health port's ``/healthz``."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url.removesuffix("/mcp") + "/healthz" if url.endswith("/mcp") else url
        self.latencies: list[float] = []
        self.failures = 0
        self.failed_at: list[float] = []
        """When each failure happened (``time.perf_counter()``)."""
        self.refused_at: list[float] = []
        """When a connection was refused (the server no longer listens)."""
        self._halt = threading.Event()

    def run(self) -> None:
        import httpx2

        http = httpx2.Client(timeout=10)
        try:
            while not self._halt.is_set():
                t0 = time.perf_counter()
                try:
                    try:
                        answer = http.get(self.url)
                    except (httpx2.RemoteProtocolError, httpx2.ReadError):
                        # The kept-alive connection was closed as the request went out (a
                        # stopping server closes its idle connections): a client asks
                        # again on a new one, and only that answer counts.
                        http.close()
                        http = httpx2.Client(timeout=10)
                        t0 = time.perf_counter()
                        answer = http.get(self.url)
                    if answer.status_code >= 500:
                        raise httpx2.HTTPError("server error")
                    self.latencies.append((time.perf_counter() - t0) * 1000)
                except httpx2.ConnectError:  # nobody listens: counted apart
                    self.refused_at.append(time.perf_counter())
                except httpx2.HTTPError:
                    self.failures += 1
                    self.failed_at.append(time.perf_counter())
                self._halt.wait(0.1)
        finally:
            http.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=20)


# ----------------------------------------------------------------------------- clients


def client_main(
    url: str, token: str, sessions: int, runs: int, kind: str, era: str, hang: float
) -> None:
    """One client process: open ``sessions`` MCP sessions, say ready, wait for "go" on
    stdin, make the calls, print the latencies as JSON, wait for "close", close.

    A session whose opening or one call takes longer than ``hang`` seconds is counted as
    hung and makes no more calls (the benchmark always ends)."""
    import anyio

    anyio.run(_client, url, token, sessions, runs, kind, era, hang)


async def _client(
    url: str, token: str, sessions: int, runs: int, kind: str, era: str, hang: float
) -> None:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    go, close = anyio.Event(), anyio.Event()
    opened = 0
    first: list[float] = []
    marks: list[dict[str, Any]] = []
    """Per session, instants (``time.monotonic()``) of its first two calls, to line up
    with the server's (``_timing``): the call began, its POST left httpx, the answer's
    headers came back, the call returned."""
    second: list[float] = []
    rest: list[float] = []
    errors: list[str] = []
    hung = 0
    finished = 0
    all_done = anyio.Event()
    limit = anyio.Semaphore(20)  # connect at most 20 at once

    async def call(client: Any, i: int, n: int) -> tuple[float, bool, str]:
        t0 = time.perf_counter()
        if kind == "codemode":
            code = "n = 1\nn" if n == 0 else "n += 1\nn"
            r = await client.call_tool("run_code", {"code": code})
            ok = not r.is_error and r.structured_content["value"] == n + 1
        elif kind.startswith("sleep"):  # sleep<S>: one call that takes S seconds
            code = f"import time\ntime.sleep({float(kind[5:])})\n'finished'"
            r = await client.call_tool("run_code", {"code": code})
            ok = not r.is_error and r.structured_content["value"] == "finished"
        else:
            r = await client.call_tool("echo", {"text": f"{i}:{n}"})
            ok = not r.is_error and r.content[0].text == f"{i}:{n}"
        ms = (time.perf_counter() - t0) * 1000
        return ms, ok, "" if ok else str(r.content[0].text)[:300]

    mode = "legacy" if era == "handshake" else "2026-07-28"

    async def session(i: int) -> None:
        nonlocal opened, finished, hung
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if era == "stateless":
            headers["Codemode-Session"] = f"bench-{os.getpid()}-{i}"
        mine: dict[str, Any] = {"sid": None, "calls": []}
        now: dict[str, float] = {}

        async def on_request(request: Any) -> None:
            if request.method == "POST" and "req" not in now and "t0" in now:
                now["req"] = time.monotonic()

        async def on_response(response: Any) -> None:
            sid = response.headers.get("mcp-session-id")
            if sid:
                mine["sid"] = sid
            if response.request.method == "POST" and "req" in now and "resp" not in now:
                now["resp"] = time.monotonic()

        hooks: dict[str, list[Any]] = {"request": [on_request], "response": [on_response]}
        try:
            async with (
                httpx2.AsyncClient(
                    headers=headers, timeout=httpx2.Timeout(60, read=600), event_hooks=hooks
                ) as h,
            ):
                async with limit:
                    transport = streamable_http_client(url, http_client=h)
                    # Entering opens the client's task group: no cancel scope around it.
                    client = await _enter(Client(transport, mode=mode))
                    with anyio.fail_after(hang):
                        await client.list_tools()
                opened += 1
                try:
                    await go.wait()
                    for n in range(runs):
                        if n < 2:
                            now.clear()
                            now["t0"] = time.monotonic()
                        with anyio.fail_after(hang):
                            ms, ok, err = await call(client, i, n)
                        if n < 2:
                            now["t1"] = time.monotonic()
                            mine["calls"].append(dict(now))
                            if n == min(1, runs - 1):
                                marks.append(mine)
                        (first if n == 0 else rest).append(ms)
                        if n == 1:
                            second.append(ms)
                        if not ok:
                            errors.append(err)
                    finished += 1
                    if finished == sessions:
                        all_done.set()
                    await close.wait()
                finally:
                    await client.__aexit__(None, None, None)
        except TimeoutError:
            hung += 1
            errors.append(f"hung: no answer within {hang:g} s")
            finished += 1
            if finished == sessions:
                all_done.set()
        except Exception as exc:  # noqa: BLE001 - counted, never a crash of the benchmark
            errors.append(f"{type(exc).__name__}: {exc}"[:300])
            finished += 1
            if finished == sessions:
                all_done.set()

    async def control() -> None:
        while opened + len(errors) < sessions:
            await anyio.sleep(0.05)
        print("ready", flush=True)
        line = await anyio.to_thread.run_sync(sys.stdin.readline)
        assert line.strip() == "go"
        go.set()
        await all_done.wait()
        cpu = time.process_time()
        report = {"first": first, "second": second, "rest": rest, "errors": errors,
                  "hung": hung, "cpu_s": cpu, "marks": marks}  # fmt: skip
        print(json.dumps(report), flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)  # "close"
        close.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(control)
        for i in range(sessions):
            tg.start_soon(session, i)


async def _enter(client: Any) -> Any:
    return await client.__aenter__()


# ----------------------------------------------------------------------------- one row


@dataclass
class Row:
    name: str
    sessions: int
    calls: int = 0
    errors: list[str] = field(default_factory=list)
    hung: int = 0
    """Sessions that waited more than ``--hang`` seconds for one answer."""
    wall: float = 0.0
    latencies: list[float] = field(default_factory=list)
    first: list[float] = field(default_factory=list)
    """Each session's first call: its first ``run_code`` (codemode starts its session
    then) or ``echo``, sent by all sessions at the same instant."""
    second: list[float] = field(default_factory=list)
    """Each session's second call: the same burst of calls, sessions already started."""
    client_cpu_ms: float = 0.0
    """CPU of the client processes (the official MCP client) per call: the load generator
    shares the machine's cores with the server."""
    load: tuple[float, float] = (0.0, 0.0)
    """The 1-minute load average when the row started and when it ended."""
    server_rss_mb: float = 0.0
    worker_rss_mb: float = 0.0
    workers: int = 0
    server_cpu_ms: float = 0.0
    """Server CPU per call."""
    worker_cpu_ms: float = 0.0
    health_ms: list[float] = field(default_factory=list)
    health_failures: int = 0
    port_health_ms: list[float] = field(default_factory=list)
    """Latencies of the health port's ``/healthz`` (its own thread, off the event loop)."""
    port_health_failures: int = 0
    parts: list[dict[str, list[float]]] = field(default_factory=lambda: [{}, {}])
    """Where the first and the second calls' time went (:func:`breakdown`), ms per part."""
    initialize_ms: list[float] = field(default_factory=list)
    """The server's time for each session's ``initialize`` (before the timing starts)."""
    burst: str = ""
    """The burst of first calls' CPU, measured (:mod:`_burst`)."""

    @property
    def rate(self) -> float:
        return self.calls / self.wall if self.wall else 0.0

    def cells(self) -> list[object]:
        h = f"{max(self.health_ms):.1f}" if self.health_ms else "-"
        if self.health_failures:
            h += f" ({self.health_failures} failed)"
        if self.port_health_ms:
            h += f" / {max(self.port_health_ms):.1f}"
            if self.port_health_failures:
                h += f" ({self.port_health_failures} failed)"
        workers = f"{self.worker_rss_mb:.0f} ({self.workers} procs)" if self.workers else "-"
        cpu = f"{self.server_cpu_ms:.2f}" + (f" + {self.worker_cpu_ms:.2f}" if self.workers else "")
        return [self.name, self.sessions, self.calls, len(self.errors), self.hung,
                f"{self.rate:.0f}",
                pct(self.latencies, 50), pct(self.latencies, 95), pct(self.latencies, 99),
                pct(self.first, 50), pct(self.first, 95), self._server_first(),
                pct(self.second, 95), cpu,
                f"{self.client_cpu_ms:.2f}", f"{self.server_rss_mb:.0f}", workers, h,
                f"{self.load[0]:.1f} / {self.load[1]:.1f}"]  # fmt: skip

    def _server_first(self) -> str:
        ms = self.parts[0].get("server", [])
        return f"{pct(ms, 50):.1f} / {pct(ms, 95):.1f}" if ms else "-"

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name, "sessions": self.sessions, "calls": self.calls,
            "errors": len(self.errors), "hung_sessions": self.hung, "calls_per_s": self.rate,
            "p50": pct(self.latencies, 50), "p95": pct(self.latencies, 95),
            "p99": pct(self.latencies, 99), "first_p50": pct(self.first, 50),
            "first_p95": pct(self.first, 95), "second_p95": pct(self.second, 95),
            "client_cpu_ms_per_call": self.client_cpu_ms, "load_start": self.load[0],
            "load_end": self.load[1], "server_rss_mb": self.server_rss_mb,
            "worker_rss_mb": self.worker_rss_mb, "worker_processes": self.workers,
            "server_cpu_ms_per_call": self.server_cpu_ms,
            "worker_cpu_ms_per_call": self.worker_cpu_ms,
            "healthz_max_ms": max(self.health_ms) if self.health_ms else None,
            "healthz_failures": self.health_failures, "error_samples": self.errors[:5],
            "health_port_max_ms": max(self.port_health_ms) if self.port_health_ms else None,
            "health_port_failures": self.port_health_failures,
            "first_call_parts": {k: {"p50": pct(v, 50), "p95": pct(v, 95), "n": len(v)}
                                 for k, v in self.parts[0].items() if k in PARTS},
            "second_call_parts": {k: {"p50": pct(v, 50), "p95": pct(v, 95), "n": len(v)}
                                  for k, v in self.parts[1].items() if k in PARTS},
            "first_calls_on_a_new_connection": sum(self.parts[0].get("new_connection", [])),
            "second_calls_on_a_new_connection": sum(self.parts[1].get("new_connection", [])),
            "initialize_server_p50": pct(self.initialize_ms, 50),
            "initialize_server_p95": pct(self.initialize_ms, 95),
        }  # fmt: skip


def drive(server: Server, name: str, kind: str, sessions: int, args: argparse.Namespace) -> Row:
    procs = max(1, min(args.procs, sessions))
    shares = [sessions // procs + (1 if i < sessions % procs else 0) for i in range(procs)]
    me = [sys.executable, str(ME), "--client", server.url, server.token or ""]
    children = [
        subprocess.Popen(
            [*me, str(n), str(args.runs), kind, args.era, str(args.hang)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in shares
    ]
    row = Row(name, sessions)
    marks: list[dict[str, Any]] = []
    load0 = os.getloadavg()[0]
    probe = HealthProbe(server.url)
    port_probe = HealthProbe(server.health) if server.health else None
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise SystemExit(f"a client process of {name} did not get ready")
        settle(server.proc.pid)
        probe.start()
        if port_probe is not None:
            port_probe.start()
        workers = _children(server.proc.pid)
        cpu0 = _cpu_s(server.proc.pid), sum(_cpu_s(p) for p in workers)
        client0 = sum(_cpu_s(c.pid) for c in children)
        spy = profile(server, args, f"{kind}-{sessions}") if args.profile else None
        clients = [c.pid for c in children]
        groups = {"server": [server.proc.pid], "workers": workers, "clients": clients}
        tool = "run_code" if kind == "codemode" else "echo"
        burst = BurstCpu(server.log, sessions, tool, groups) if server.log else None
        if burst is not None:
            burst.start()
        t0 = time.perf_counter()
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        for child in children:
            assert child.stdout is not None
            data = json.loads(child.stdout.readline())
            row.first += data["first"]
            row.second += data["second"]
            row.client_cpu_ms += data["cpu_s"] * 1000
            row.latencies += data["rest"]
            row.errors += data["errors"]
            row.hung += data["hung"]
            marks += data["marks"]
        row.wall = time.perf_counter() - t0
        if burst is not None:
            burst.stop()
            row.burst = burst.line(name)
        if server.log is not None:
            records = read_log(server.log)
            row.parts = breakdown(marks, records, "run_code" if kind == "codemode" else "echo")
            row.initialize_ms = [
                (r["data"] - r["in"]) * 1000
                for r in records
                if r.get("method") == "initialize" and r.get("data")
            ]
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
        row.calls = len(row.first) + len(row.latencies)
        row.latencies += row.first  # every call counts in the latency percentiles
        workers = sorted(set(workers) | set(_children(server.proc.pid)))
        calls = max(row.calls, 1)
        row.server_cpu_ms = (_cpu_s(server.proc.pid) - cpu0[0]) * 1000 / calls
        row.client_cpu_ms = (row.client_cpu_ms - client0 * 1000) / calls
        row.load = (load0, os.getloadavg()[0])
        row.worker_cpu_ms = (sum(_cpu_s(p) for p in workers) - cpu0[1]) * 1000 / calls
        row.server_rss_mb = _rss_kb(server.proc.pid) / 1024
        if kind == "codemode":
            row.worker_rss_mb = sum(_rss_kb(p) for p in workers) / 1024
            row.workers = len(workers)
    finally:
        probe.stop()
        if port_probe is not None:
            port_probe.stop()
            row.port_health_ms = port_probe.latencies
            row.port_health_failures = port_probe.failures + len(port_probe.refused_at)
        if kind == "codemode":
            row.health_ms = probe.latencies
            row.health_failures = probe.failures + len(probe.refused_at)
        for child in children:
            if child.stdin is not None and child.poll() is None:
                try:
                    child.stdin.write("close\n")
                    child.stdin.close()
                except OSError:
                    pass
        for child in children:
            try:
                child.wait(timeout=120)
            except subprocess.TimeoutExpired:
                child.kill()
            if child.stdout is not None:
                child.stdout.close()
    return row


PARTS = {
    "client": ("client-observed", "call_tool begins -> call_tool returns, in the client"),
    "before_send": ("client: before send", "call_tool begins -> its POST leaves httpx"),
    "to_server": ("to the server app", "POST leaves httpx -> the server's app has it "
                  "(kernel, the server loop's queue, uvicorn's parsing)"),
    "server": ("server-side", "the app has it -> the answer's last data handed to uvicorn"),
    "back": ("back to the client", "answer handed to uvicorn -> call_tool returns "
             "(uvicorn sends, the client reads, parses, validates)"),
}  # fmt: skip


def breakdown(
    marks: list[dict[str, Any]], records: list[dict[str, Any]], tool: str
) -> list[dict[str, list[float]]]:
    """For the first and the second call of each session: the client's instants beside the
    server's (:mod:`_timing`), in ms per part of :data:`PARTS`."""
    firsts = first_calls(records, tool)
    seconds: dict[str, dict[str, Any]] = {}
    ports: dict[str, set[int]] = {}  # the connections each session used so far
    fresh: set[int] = set()  # the calls a connection of their own carried (by id())
    for r in sorted(records, key=lambda r: r["in"]):
        sid = r["sid"]
        if r.get("tool") == tool and sid in firsts and r is not firsts[sid]:
            seconds.setdefault(sid, r)
        if sid and r.get("peer") is not None:
            if r.get("method") == "tools/call" and r["peer"] not in ports.get(sid, set()):
                fresh.add(id(r))
            ports.setdefault(sid, set()).add(r["peer"])
    out: list[dict[str, list[float]]] = [
        {k: [] for k in (*PARTS, "new_connection")},
        {k: [] for k in (*PARTS, "new_connection")},
    ]
    for m in marks:
        for n, (c, found) in enumerate(zip(m["calls"], (firsts, seconds), strict=False)):
            got = found.get(m["sid"] or "")
            if got is None or got.get("data") is None or "req" not in c:
                continue
            r = got
            parts = out[n]
            parts["client"].append((c["t1"] - c["t0"]) * 1000)
            parts["before_send"].append((c["req"] - c["t0"]) * 1000)
            parts["to_server"].append((r["in"] - c["req"]) * 1000)
            parts["server"].append((r["data"] - r["in"]) * 1000)
            parts["back"].append((c["t1"] - r["data"]) * 1000)
            parts["new_connection"].append(1.0 if id(r) in fresh else 0.0)
    return out


def profile(server: Server, args: argparse.Namespace, name: str) -> subprocess.Popen[bytes]:
    """Sample the server with py-spy during the calls (``--profile DIR``)."""
    out = Path(args.profile) / f"{name}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [args.py_spy, "record", "--pid", str(server.proc.pid), "--rate", "250",
            "--format", "raw", "--output", str(out), "--nonblocking"]  # fmt: skip
    spy = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)  # let it attach before the calls start
    return spy


# ----------------------------------------------------------------------------- stop

CGROUP_PARENTS = [Path("/sys/fs/cgroup", c, "codemode") for c in ("memory", "pids", "cpu")]


def worker_cgroups(pids: list[int]) -> set[Path]:
    """The per-worker cgroup directories holding any of ``pids``."""
    found: set[Path] = set()
    for parent in CGROUP_PARENTS:
        for group in parent.glob("w-*") if parent.is_dir() else ():
            try:
                held = {int(p) for p in (group / "cgroup.procs").read_text().split()}
            except OSError:
                continue
            if held & set(pids):
                found.add(group)
    return found


def _health(url: str) -> dict[str, Any]:
    import httpx2

    data: dict[str, Any] = httpx2.get(url.removesuffix("/mcp") + "/healthz", timeout=10).json()
    return data


def graceful_stop(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    """SIGTERM while ``--stop-calls`` calls of ``--stop-seconds`` s run (one per session):
    how many finish, the exit status, how long the stop took, what is left behind."""
    n = args.stop_calls
    server = start_codemode(base, args, n)
    me = [sys.executable, str(ME), "--client", server.url, TOKEN, str(n), "1",
          f"sleep{args.stop_seconds:g}", args.era, str(args.hang)]  # fmt: skip
    child = subprocess.Popen(me, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    probe = HealthProbe(server.url)
    assert child.stdin is not None and child.stdout is not None
    try:
        if child.stdout.readline().strip() != "ready":
            raise SystemExit("the client process of the stop test did not get ready")
        settle(server.proc.pid)
        child.stdin.write("go\n")
        child.stdin.flush()
        deadline = time.monotonic() + 120
        while _health(server.url)["calls"] < n:
            if time.monotonic() > deadline:
                raise SystemExit(f"the {n} calls of the stop test did not all start")
            time.sleep(0.02)
        workers = _children(server.proc.pid)
        cgroups = worker_cgroups(workers)
        probe.start()
        t0 = time.perf_counter()
        server.proc.send_signal(signal.SIGTERM)
        status = server.proc.wait(timeout=args.hang)
        took = time.perf_counter() - t0
        ended = time.perf_counter()
        data = json.loads(child.stdout.readline())
    finally:
        probe.stop()
        if child.poll() is None:
            child.stdin.write("close\n")
            child.stdin.close()
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
        child.stdout.close()
        server.stop()
    finished = len(data["first"]) - sum(1 for e in data["errors"] if not e.startswith("hung"))
    alive = [p for p in workers if _live(p)]
    failed = sum(1 for t in probe.failed_at if t < ended)
    refused = sum(1 for t in probe.refused_at if t < ended)
    return {"calls": n, "call_s": args.stop_seconds, "finished": max(finished, 0),
            "errors": len(data["errors"]), "error_samples": data["errors"][:5],
            "exit_status": status, "stop_s": round(took, 2), "processes_left": len(alive),
            "cgroups_left": len([g for g in cgroups if g.exists()]), "cgroups": len(cgroups),
            "healthz_answers": len(probe.latencies),
            "healthz_max_ms": round(max(probe.latencies, default=0.0), 1),
            "healthz_failed": failed, "healthz_refused": refused}  # fmt: skip


# ----------------------------------------------------------------------------- main


def parts_table(rows: list[Row]) -> str:
    """Where the first and second calls' time went, p50 / p95 of each part (ms); the
    parts' percentiles do not add up to the whole's."""
    lines = []
    for r in rows:
        for n, label in enumerate(("first", "second")):
            parts = r.parts[n]
            if not parts.get("client"):
                continue
            cells = [f"{pct(parts[k], 50):.1f} / {pct(parts[k], 95):.1f}" for k in PARTS]
            new = int(sum(parts["new_connection"]))
            lines.append([r.name, r.sessions, label, len(parts["client"]), new, *cells])
    init = "; ".join(
        f"{r.name} ({r.sessions}): {pct(r.initialize_ms, 50):.1f} / {pct(r.initialize_ms, 95):.1f}"
        for r in rows
        if r.initialize_ms
    )
    legend = "".join(f"\n    {short}: {long}" for short, long in PARTS.values())
    shorts = [short for short, _ in PARTS.values()]
    legend += (
        "\n    on a new connection: calls whose POST came on a connection the session had "
        "not used before (uvicorn closes idle ones after 5 s): their 'to the server app' "
        "includes opening it"
    )
    return (
        table(
            "where each session's first and second calls' time goes, p50 / p95 ms (the "
            "client's and the server's instants on one clock)",
            ["server", "sessions", "call", "n", "on a new connection", *shorts],
            lines,
        )
        + legend
        + f"\n    initialize, server-side (before the timing), p50 / p95: {init}"
    )


def main(args: argparse.Namespace) -> None:
    scales = [int(x) for x in args.sessions.split(",")]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)  # the sandbox's unprivileged uid must reach the workspace
        base = Path(tmp) / "ws"
        for n in scales:
            bare = start_bare()
            try:
                rows.append(drive(bare, "bare SDK echo", "bare", n, args))
            finally:
                bare.stop()
            ours = start_codemode(base, args, n)
            try:
                rows.append(drive(ours, "codemode run_code", "codemode", n, args))
            finally:
                ours.stop()
            print(f"... {n} sessions done", file=sys.stderr, flush=True)
        stop = graceful_stop(base, args) if args.stop_calls else None
    load = os.getloadavg()
    print(table(
        f"{args.runs} calls per session, {args.era} protocol, clients in {args.procs} "
        f"processes, executor {args.executor}, warm pool {args.pool} (latency ms; load at the end "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f})",
        ["server", "sessions", "calls", "errors", "hung", "calls/s", "p50", "p95", "p99",
         "first p50", "first p95", "first p50 / p95 server-side", "second p95",
         "CPU ms/call (server + workers)",
         "client CPU ms/call", "server RSS MB", "workers RSS MB",
         "healthz max ms (port / health port)", "load start / end"],
        [r.cells() for r in rows],
    ))  # fmt: skip
    print(parts_table(rows))
    if stop is not None:
        print(table(
            "graceful stop: SIGTERM while calls run (one per session)",
            ["calls", "call s", "finished", "errors", "exit status", "SIGTERM->exit s",
             "worker procs left", "cgroups left", "healthz answers while stopping",
             "healthz max ms", "healthz failed", "healthz refused (listener closed)"],
            [[stop["calls"], stop["call_s"], stop["finished"], stop["errors"],
              stop["exit_status"], stop["stop_s"], stop["processes_left"],
              f"{stop['cgroups_left']}/{stop['cgroups']}", stop["healthz_answers"],
              stop["healthz_max_ms"], stop["healthz_failed"], stop["healthz_refused"]]],
        ))  # fmt: skip
    print()
    for bare_row, ours_row in zip(rows[::2], rows[1::2], strict=True):
        ratio = ours_row.rate / bare_row.rate if bare_row.rate else float("nan")
        tail = pct(ours_row.latencies, 99) / pct(ours_row.latencies, 50)
        print(f"{ours_row.sessions} sessions: throughput {ratio:.0%} of the bare SDK server, "
              f"p99/p50 {tail:.1f}x, first call p95 {pct(ours_row.first, 95):.1f} ms "
              f"(bare server's {pct(bare_row.first, 95):.1f} ms), "
              f"errors {len(ours_row.errors)}")  # fmt: skip
        for r in (ours_row, bare_row):
            added = pct(r.first, 95) - pct(r.second, 95)
            cpu = r.client_cpu_ms + r.server_cpu_ms + r.worker_cpu_ms
            cores = os.cpu_count() or 1
            print(f"    {r.name}: a burst of {r.sessions} calls needs {r.sessions * cpu:.0f} ms "
                  f"of CPU (clients + server + workers, {cpu:.2f} ms per call on average): at "
                  f"least {r.sessions * cpu / cores:.0f} ms on this machine's {cores} cores, "
                  f"which the load generator shares")  # fmt: skip
            if r.burst:
                print(r.burst)
            print(f"    {r.name}: first call p95 {pct(r.first, 95):.1f} ms, the same sessions' "
                  f"second call p95 {pct(r.second, 95):.1f} ms (a session's start adds "
                  f"{added:+.1f} ms); CPU per call: server {r.server_cpu_ms:.2f} ms, clients "
                  f"{r.client_cpu_ms:.2f} ms; load {r.load[0]:.1f} -> {r.load[1]:.1f}")  # fmt: skip
    for r in rows:
        for e in r.errors[:3]:
            print(f"error ({r.name}, {r.sessions}): {e}")
    if args.json:
        data = {"rows": [r.summary() for r in rows], "graceful_stop": stop}
        Path(args.json).write_text(json.dumps(data, indent=2))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-codemode":
        from _timing import serve_codemode

        serve_codemode(sys.argv[2:])
        raise SystemExit(0)
    if len(sys.argv) > 1 and sys.argv[1] == "--bare":
        bare_server_main(int(sys.argv[2]))
        raise SystemExit(0)
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        url, token, n, runs, kind, era, hang = sys.argv[2:9]
        client_main(url, token, int(n), int(runs), kind, era, float(hang))
        raise SystemExit(0)
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sessions", default="50,200,500")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--pool", type=int, default=64)
    parser.add_argument("--executor", default="sandbox", choices=["sandbox", "subprocess"])
    parser.add_argument(
        "--era",
        default="handshake",
        choices=["handshake", "stateless"],
        help="protocol of both servers' clients: the 2025 handshake (what negotiating "
        "clients get from codemode) or the stateless 2026-07-28 one (with Codemode-Session)",
    )
    parser.add_argument(
        "--hang",
        type=float,
        default=300.0,
        help="a session waiting longer than this for one answer counts as hung",
    )
    parser.add_argument(
        "--stop-calls",
        type=int,
        default=10,
        help="calls running when the server gets SIGTERM (0: skip the graceful stop test)",
    )
    parser.add_argument("--stop-seconds", type=float, default=3.0, help="each such call's length")
    parser.add_argument("--quick", action="store_true", help="CI: 10 sessions x 5 runs")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--profile", help="sample each server with py-spy into this directory")
    parser.add_argument("--py-spy", default="py-spy", help="the py-spy program (--profile)")
    ns = parser.parse_args()
    if ns.quick:
        ns.sessions, ns.runs, ns.procs, ns.pool, ns.stop_calls = "10", 5, 2, 10, 4
    main(ns)
