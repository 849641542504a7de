"""The privacy detectors alone: CPU time of each one over a JSON tool result's text.

What ``Privacy.protect`` hands the scanner: the result's strings joined by NUL. Each
detector's ``find`` runs over it alone, in this process (no scanner process); a figure is
the least thread CPU time over several rounds (robust to a loaded machine, where wall
time is not). ``MB/s CPU`` is the JSON's size over the detectors' total; ``one scan``:
all of them as the scanner runs them, sharing passes (``codemode.literals.one_pass``).

``--against DIR`` compares with another tree of the source (``DIR/src``, e.g. main's:
``git archive main src | tar -x -C DIR``) in the same run: the two are measured in
turns, each in a fresh interpreter, and the spans each detector found must agree.

Run: ``.venv/bin/python benchmarks/privacy/bench_detectors.py [--against DIR] [--quick]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

PAYLOADS = [
    ("customers", 10_000),
    ("orders", 10_000),
    ("customers", 1_000_000),
    ("orders", 1_000_000),
]


def measure(quick: bool) -> dict[str, Any]:
    """{payload: {"bytes": JSON size, "cpu": {detector: seconds}, "found": {detector: n}}}."""
    from crm_data import crm_rows, order_rows

    from codemode.privacy import pool
    from codemode.privacy.config import PrivacyConfig
    from codemode.privacy.engine import build_scanner
    from codemode.privacy.walk import Leaves

    pool.ENABLED = False
    scanner = build_scanner(PrivacyConfig(enabled=True))
    out: dict[str, Any] = {}
    for kind, target in PAYLOADS[:2] if quick else PAYLOADS:
        make = crm_rows if kind == "customers" else order_rows
        per_row = len(json.dumps(make(50))) / 50
        value = make(max(1, round(target / per_row)))
        text = "\0".join(Leaves.collect(value).texts)
        reps = max(3, int(1_000_000 // len(text)))
        cpu, found = {}, {}
        for det in scanner.detectors:
            name = type(det).__name__
            found[name] = len(spans := sorted(det.find(text)))
            found[name + " spans"] = hash(tuple(spans))
            best = float("inf")
            for _ in range(3 if quick else 7):
                c0 = time.thread_time()
                for _ in range(reps):
                    for _ in det.find(text):
                        pass
                best = min(best, (time.thread_time() - c0) / reps)
            cpu[name] = best
        # Every detector in one scan, as ``Scanner`` runs them: passes they share (the
        # credentials net's and the SSN detector's RE2 pass) counted once.
        scan = float("inf")
        for _ in range(3 if quick else 7):
            c0 = time.thread_time()
            for _ in range(reps):
                scanner._found(text)
            scan = min(scan, (time.thread_time() - c0) / reps)
        size = len(json.dumps(value, ensure_ascii=False).encode())
        label = f"{target // 1000} KB" if target < 1_000_000 else f"{target // 1_000_000} MB"
        out[f"{kind} {label}"] = {"bytes": size, "cpu": cpu, "found": found, "scan": scan}
    return out


def run_tree(src: Path, quick: bool) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    args = [sys.executable, __file__, "--json"] + (["--quick"] if quick else [])
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another source tree (DIR/src)")
    parser.add_argument("--rounds", type=int, default=2, help="turns of each tree")
    parser.add_argument("--quick", action="store_true", help="10 KB only, fewer rounds")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure(args.quick)))
        return
    print(f"load average at start: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    ours = HERE.parents[1] / "src"
    trees = [("new", ours)] + ([("old", args.against / "src")] if args.against else [])
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in trees}
    for _ in range(args.rounds):
        for name, src in reversed(trees):
            runs[name].append(run_tree(src, args.quick))
    new = runs["new"]
    old = runs.get("old")
    head = "payload, detector".ljust(34) + "   new us"
    head += "   old us  ratio" if old else ""
    print("\nPrivacy detectors alone: least thread CPU per scan of the joined text (us)")
    print(head + "\n" + "-" * len(head))
    for payload, first in new[0].items():
        size = first["bytes"]
        total_new = total_old = 0.0
        for det in first["cpu"]:
            n = min(r[payload]["cpu"][det] for r in new)
            total_new += n
            line = f"{payload:16s} {det:17s} {n * 1e6:9.1f}"
            if old and det not in old[0][payload]["cpu"]:
                line += "         -      -  (new detector)"
            elif old:
                o = min(r[payload]["cpu"][det] for r in old)
                total_old += o
                same = old[0][payload]["found"][det] == first["found"][det] and (
                    old[0][payload]["found"][det + " spans"] == first["found"][det + " spans"]
                )
                line += f" {o * 1e6:9.1f} {n / o:6.2f}" + ("" if same else "  FOUND DIFFERS")
            print(line)
        line = f"{payload:16s} {'all':17s} {total_new * 1e6:9.1f}"
        if old:
            line += f" {total_old * 1e6:9.1f} {total_new / total_old:6.2f}"
            line += f"   MB/s CPU {size / 1e6 / total_old:.1f} -> {size / 1e6 / total_new:.1f}"
        else:
            line += f"   MB/s CPU {size / 1e6 / total_new:.1f}"
        print(line)
        scan_new = min(r[payload]["scan"] for r in new)
        line = f"{payload:16s} {'one scan':17s} {scan_new * 1e6:9.1f}"
        if old:
            scan_old = min(r[payload]["scan"] for r in old)
            line += f" {scan_old * 1e6:9.1f} {scan_new / scan_old:6.2f}"
            line += f"   MB/s CPU {size / 1e6 / scan_old:.1f} -> {size / 1e6 / scan_new:.1f}"
        else:
            line += f"   MB/s CPU {size / 1e6 / scan_new:.1f}"
        print(line + "\n")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
