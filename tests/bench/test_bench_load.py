"""The load benchmark runs in its quick mode: both servers served every call, and a
SIGTERM let the running calls finish."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_load_quick_serves_every_call_and_stops_gracefully(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_load.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "throughput" in proc.stdout and "of the bare SDK server" in proc.stdout
    data = json.loads(out.read_text())
    rows = {row["name"]: row for row in data["rows"]}
    assert set(rows) == {"bare SDK echo", "codemode run_code"}
    for row in rows.values():
        assert (row["calls"], row["errors"], row["hung_sessions"]) == (10 * 5, 0, 0), row
    assert rows["codemode run_code"]["healthz_failures"] == 0
    assert rows["codemode run_code"]["health_port_max_ms"] is not None  # the port answered
    assert rows["codemode run_code"]["health_port_failures"] == 0
    assert rows["codemode run_code"]["worker_processes"] > 0
    for row in rows.values():  # the server's side of every session's first two calls
        for parts in (row["first_call_parts"], row["second_call_parts"]):
            assert {part["n"] for part in parts.values()} == {10}, row["name"]
            assert 0 < parts["server"]["p50"] <= parts["client"]["p50"], row["name"]
        assert row["initialize_server_p50"] > 0
    stop = data["graceful_stop"]
    assert (stop["calls"], stop["finished"], stop["exit_status"]) == (4, 4, 0), stop
    assert (stop["processes_left"], stop["cgroups_left"], stop["healthz_failed"]) == (0, 0, 0)
