"""Issue 11 figures: what a hostile worker costs the host process (items 6 and 7).

Each attack runs in a host process of its own, so its peak RSS is its own: a session
starts, a ticker task watches the event loop, and the session's code attacks the host
through its worker's pipes (forged frames, replies it never reads, output between runs).
Reported per attack: the host's peak RSS over the idle session, the longest event-loop
stall, the host's CPU time in the attack window, and what the run returned.

python benchmarks/bench_hostile_host.py [--baseline-src DIR] [--executor sandbox|subprocess]
                                        [--quick] [--only NAME]

``--baseline-src`` measures another checkout's ``src/`` (e.g. main's) in the same run,
side by side ("before"); this checkout's code is "after". ``--quick`` shrinks every attack
(CI runs it that way to keep the script working); its figures mean little.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _stats import table

SRC = Path(__file__).resolve().parent.parent / "src"
FORGE_DIR = SRC.parent / "tests" / "security"  # forge.py: the attacker's frame writer

# The host process of one attack: argv = executor, attack code, idle seconds, blob MB.
HOST = r"""
import asyncio, json, os, sys, time
from codemode import Session, SubprocessExecutor
from forge import FORGE  # tests/security/forge.py


def status_kb(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])

async def main():
    kind, code, idle, blob_mb = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    if kind == "sandbox":
        from codemode.execution.sandbox import SandboxExecutor
        ex = SandboxExecutor(pool_size=0)
    else:
        ex = SubprocessExecutor(pool_size=0)
    blob = b"\x01" * (blob_mb << 20)

    async def big(params):
        return blob  # like artifacts.load of a large artifact

    gaps = [0.0]
    last = [time.perf_counter()]
    async def tick():
        while True:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last[0] - 0.005)
            last[0] = now

    async with Session(ex) as s:
        s.host.register("bench.blob", big)
        assert (await s.run(FORGE)).error is None
        await asyncio.sleep(0.5)
        base = status_kb("VmRSS")
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # peak RSS := current RSS
        cpu, wall = time.process_time(), time.perf_counter()
        last[0] = time.perf_counter()
        ticker = asyncio.create_task(tick())
        r = await s.run(code, timeout=120)
        if idle:
            await asyncio.sleep(idle)  # between runs: what does the host do meanwhile?
        ticker.cancel()
        gaps.append(time.perf_counter() - last[0])  # a stall that lasted to the end
        if r.error is None:
            outcome = "ran to its end"
        elif r.state_lost:
            outcome = "worker stopped: " + r.error.message.split(";")[0]
        else:
            outcome = f"{r.error.type}: {r.error.message}"
        report = {
            "peak_mb": (status_kb("VmHWM") - base) / 1024,
            "stall_ms": max(gaps) * 1000,
            "cpu_s": time.process_time() - cpu,
            "wall_s": time.perf_counter() - wall,
            "outcome": outcome[:90],
        }
    print("REPORT " + json.dumps(report))

asyncio.run(main())
"""


def attacks(quick: bool) -> dict[str, tuple[str, float, int]]:
    """name -> (attack code, seconds to idle after the run, MB of each host reply)."""
    lists = 1_900_000 if quick else 19_000_000  # 5.7 MB / 57 MB of "[],"
    huge = 20 if quick else 200  # MB
    replies, reply_mb = (5, 8) if quick else (25, 30)
    idle = 1.0 if quick else 5.0
    wait = 1 if quick else 5  # the attacker's sleep after its forgery (if it is not stopped)
    return {
        f"frame of {lists * 3 / 1e6:.0f} MB of '[],' (call)": (
            'forge(b\'{"op":"call","id":1,"method":"m","params":{"a":[\' '
            f"+ b'[],' * {lists} + b'[]]}}}}')\ntime.sleep({wait})",
            0.0,
            1,
        ),
        f"frame of {huge} MB string (done)": (
            'forge(b\'{"op":"done","id":%d,"result":"\' % run_id() '
            f"+ b'x' * ({huge} << 20) + b'\"}}')\ntime.sleep({wait})",
            0.0,
            1,
        ),
        f"frame of {huge} MB string (call)": (
            'forge(b\'{"op":"call","id":1,"method":"m","params":{"a":"\' '
            f"+ b'x' * ({huge} << 20) + b'\"}}}}')\ntime.sleep({wait})",
            0.0,
            1,
        ),
        f"{replies} unread {reply_mb} MB replies": (
            f"for i in range(1, {replies + 1}):\n"
            "    forge({'op': 'call', 'id': i, 'method': 'bench.blob', 'params': {}})\n"
            f"time.sleep({4 * wait})",
            0.0,
            reply_mb,
        ),
        f"stdout flood, {idle:g} s between runs": (
            "def flood():\n"
            "    chunk = b'x' * 65536\n"
            "    while True:\n"
            "        os.write(1, chunk)\n"
            "threading.Thread(target=flood, daemon=True).start()",
            idle,
            1,
        ),
    }


def measure(src: Path, executor: str, code: str, idle: float, blob_mb: int) -> dict[str, Any]:
    path = os.pathsep.join([str(src), str(FORGE_DIR)])
    env = {**os.environ, "PYTHONPATH": path, "PYTHONWARNINGS": "ignore"}
    argv = [sys.executable, "-c", HOST, executor, code, str(idle), str(blob_mb)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("REPORT "):
            report: dict[str, Any] = json.loads(line[7:])
            return report
    return {"outcome": "host failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:80]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline-src", type=Path, help="src/ of the code to compare against")
    ap.add_argument("--executor", choices=["sandbox", "subprocess"], default="sandbox")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", help="run only the attacks whose name contains this")
    args = ap.parse_args()
    versions = [("after", SRC)]
    if args.baseline_src:
        versions.insert(0, ("before", args.baseline_src.resolve()))
    rows = []
    for name, (code, idle, blob_mb) in attacks(args.quick).items():
        if args.only and args.only not in name:
            continue
        for label, src in versions:
            r = measure(src, args.executor, code, idle, blob_mb)
            rows.append(
                [
                    name,
                    label,
                    r.get("peak_mb", float("nan")),
                    r.get("stall_ms", float("nan")),
                    r.get("cpu_s", float("nan")),
                    r.get("wall_s", float("nan")),
                    r["outcome"],
                ]
            )
    load = os.getloadavg()[0]
    print(
        table(
            f"Host under attack from its worker ({args.executor} executor; load {load:.1f} "
            f"on {os.cpu_count()} cores)",
            ["attack", "code", "peak RSS +MB", "max loop stall ms", "host CPU s", "wall s", "run"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
