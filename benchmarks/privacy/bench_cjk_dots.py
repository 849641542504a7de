"""CJK text with a dot-like character between ASCII words on every line: what it costs
the privacy scan over the same text without it.

A ``。`` between two ASCII letters or digits may be an address's dot
(``alice@example。com``), so it opens a window of folded text that the detectors scan
again (``codemode.privacy.disguise``). Chinese and Japanese prose puts one after an ASCII
word on many lines (``我用的是Python3。Windows也可以``). The figure is the least thread CPU
time of one scan by every detector (as ``Privacy``'s scanner runs them) over several
rounds; ``ratio`` is the text with the dot-likes over the same text with ``、`` in their
place (no window at all).

``--against DIR`` measures another tree of the source too (``DIR/src``, e.g. main's:
``git archive main src | tar -x -C DIR``), in turns, each in a fresh interpreter.

Run: ``.venv/bin/python benchmarks/privacy/bench_cjk_dots.py [--against DIR]``
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

LINES = {
    "zh": "我用的是Python3。Windows也可以，版本很新，请看文档里面的说明。谢谢你的帮助！",
    "ja": "毎朝Python3。Windowsでコードを書きます。明日は会議があります、よろしくお願いします。",
    "mail": "请联系alice@example。com或者打电话，我们明天见面讨论这个问题。",
}
SIZE = 200_000  # characters of text per case


def measure() -> dict[str, Any]:
    from codemode.privacy import pool
    from codemode.privacy.config import PrivacyConfig
    from codemode.privacy.engine import build_scanner

    pool.ENABLED = False
    scanner = build_scanner(PrivacyConfig(enabled=True))
    out: dict[str, Any] = {}
    for name, line in LINES.items():
        text = (line + "\n") * (SIZE // (len(line) + 1))
        plain = text.replace("。", "、")
        for label, t in (("dots", text), ("plain", plain)):
            found = scanner._found(t)
            best = float("inf")
            for _ in range(5):
                c0 = time.thread_time()
                scanner._found(t)
                best = min(best, time.thread_time() - c0)
            out[f"{name} {label}"] = {"cpu": best, "found": len(found)}
    return out


def run_tree(src: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        [sys.executable, __file__, "--json"], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="another source tree (DIR/src)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure()))
        return
    print(f"load average at start: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    trees = [("new", HERE.parents[1] / "src")]
    if args.against:
        trees.append(("old", args.against / "src"))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in trees}
    for _ in range(args.rounds):
        for name, src in reversed(trees):
            runs[name].append(run_tree(src))
    head = f"{'text':6s} {'tree':4s} {'dots ms':>9s} {'plain ms':>9s} {'ratio':>6s} {'found':>7s}"
    print(f"\nthe scan of {SIZE:,} characters: least thread CPU\n{head}\n" + "-" * len(head))
    for name in LINES:
        for tree, results in runs.items():
            dots = min(r[f"{name} dots"]["cpu"] for r in results)
            plain = min(r[f"{name} plain"]["cpu"] for r in results)
            found = results[0][f"{name} dots"]["found"]
            print(
                f"{name:6s} {tree:4s} {dots * 1e3:9.1f} {plain * 1e3:9.1f} "
                f"{dots / plain:6.2f} {found:7d}"
            )


if __name__ == "__main__":
    main()
