"""Issue 15 figures: what the guardrails cost.

1. Added latency per tool call with policy + audit on vs off. One Python tool (``echo``),
   called through ``ToolRegistry.call``, so the difference is the layers' own work:

     off     a registry with no guardrail layers (argument validation only: the baseline)
     policy  + the policy layer (a decision cached per tool) and the approval layer
     audit   + the audit layer (one HMAC-chained JSONL line per call, head copied); the
             calls belong to a run, so their lines go out in batches (``batch_lines``)
     both    + policy, approval and audit: the configuration the goal is about
     strict  ``both`` with ``batch_lines: 1``: each line written before its call returns

   The registries are called in turn, call by call, so machine noise falls evenly on all
   of them. Goal: ``both`` adds <= 0.05 ms per call (median) to ``off``. The mean is shown
   too: it carries the calls that write a batch (one in ``batch_lines``).

2. Code checks per 200-line cell (``codemode.checks``), against ``ast.parse`` of the same
   cell in the same run (the floor of any check that parses the whole cell, which this
   one does not) and ``compile()`` (what the worker does with every cell anyway). Cells:
   clean (no rule's word: the prefilter decides), words only inside strings (the lexer
   decides, no parse), five findings (five statements parsed), and a finding on every
   line (plain imports: read without a parse). Each run scans a new cell; "seen cell"
   is the same cell scanned again (remembered). Goal: <= 1 ms per cell.

python benchmarks/bench_guardrails.py [--calls 5000] [--cells 2000] [--quick]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _stats import median, pct, table
from codemode import assembly
from codemode.audit.capability import trail_for
from codemode.audit.config import AuditConfig
from codemode.checks import Checker, CodeChecksConfig
from codemode.context import CallContext
from codemode.policy import PolicyConfig
from codemode.tools.registry import ToolRegistry

KEY = "bench-audit-key-0123456789abcdef"


def echo(text: str) -> str:
    """Echo ``text``."""
    return text


def registry(sections: dict[str, Any], workspace: str) -> ToolRegistry:
    reg = ToolRegistry()
    reg.workspace = workspace
    reg.register(echo, server="bench", annotations={"readOnlyHint": True})
    assembly.configure_registry(reg, assembly.installed(), sections)
    return reg


async def tool_calls(n: int) -> list[list[object]]:
    os.environ.setdefault("CODEMODE_AUDIT_KEY", KEY)
    with tempfile.TemporaryDirectory() as tmp:
        policy = PolicyConfig(read_only="allow", destructive="ask", open_world="allow")
        audit = AuditConfig(enabled=True, head_file=str(Path(tmp) / "outside" / "head"))
        strict = AuditConfig(
            enabled=True, head_file=str(Path(tmp) / "outside" / "head-strict"), batch_lines=1
        )
        configs: dict[str, dict[str, Any]] = {
            "off": {},
            "policy": {"policy": policy},
            "audit": {"audit": audit},
            "both": {"policy": policy, "audit": audit},
            "strict": {"policy": policy, "audit": strict},
        }
        regs = {name: registry(cfg, str(Path(tmp) / name)) for name, cfg in configs.items()}
        ctx = CallContext(session_id="bench", run_id="run")
        samples: dict[str, list[float]] = {name: [] for name in regs}
        args = {"text": "ping"}
        for reg in regs.values():  # warm: listing, decision caches, open log files
            for _ in range(50):
                await reg.call("bench", "echo", args, context=ctx)
        for _ in range(n):
            for name, reg in regs.items():
                start = time.perf_counter()
                await reg.call("bench", "echo", args, context=ctx)
                samples[name].append((time.perf_counter() - start) * 1000)
        for cfg in (audit, strict):  # the run ends: its pending lines are written
            trail_for(cfg).close()
        for name in ("both", "strict"):
            written = sum(1 for _ in (Path(tmp) / name / "audit" / "audit.jsonl").open())
            assert written == n + 50, (name, written)
    base = median(samples["off"])
    rows: list[list[object]] = []
    for name, values in samples.items():
        mid = median(values)
        mean = statistics.fmean(values)
        rows.append([name, mid, mean, pct(values, 95), mid - base, f"{mid / base:.2f}x"])
    return rows


def cell(kind: str, lines: int = 200) -> str:
    out: list[str] = []
    for i in range(lines):
        k = i % 5
        if kind == "findings" and i % 40 == 7:
            out.append(f"r{i} = eval('{i} + 1')")
        elif kind == "every":
            out.append(f"import subprocess as s{i}; s{i}.run(['true'])")
        elif k == 0:
            out.append(f"x{i} = tools.notes.read_note(name='n{i}')")
        elif k == 1:
            word = "subprocess and eval" if kind == "strings" else "words"
            out.append(f"rows{i} = [r for r in str(x{i - 1}).split() if r != '{word}']")
        elif k == 2:
            out.append(f"total{i} = sum(len(r) for r in rows{i - 1}) + {i}")
        elif k == 3:
            out.append(f"print('step', {i}, total{i - 1})")
        else:
            out.append(f"d{i} = {{'a': {i}, 'b': [1, 2, 3], 'c': str(x{i - 4})[:10]}}")
    return "\n".join(out) + "\n"


def code_checks(n: int) -> list[list[object]]:
    checker = Checker(CodeChecksConfig())
    rows: list[list[object]] = []
    for kind in ("clean", "strings", "findings", "every"):
        code = cell(kind)
        found = len(checker.scan(code))
        checks: list[float] = []
        parses: list[float] = []
        compiles: list[float] = []
        for i in range(n):
            # A new cell each time (a comment differs), so the checker's memory of cells
            # it has seen does not answer: this is the cost of a cell never seen before.
            fresh = f"{code}# {i}\n"
            start = time.perf_counter()
            checker.scan(fresh)
            checks.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            ast.parse(fresh)
            parses.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            compile(fresh, "<cell>", "exec")
            compiles.append((time.perf_counter() - start) * 1000)
        again: list[float] = []
        for _ in range(n):
            start = time.perf_counter()
            checker.scan(code)
            again.append((time.perf_counter() - start) * 1000)
        mid, floor = median(checks), median(parses)
        rows.append(
            [
                kind,
                found,
                mid,
                pct(checks, 95),
                floor,
                f"{mid / floor:.2f}x",
                median(compiles),
                median(again),
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--cells", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="few samples (CI)")
    args = parser.parse_args()
    calls, cells = (200, 100) if args.quick else (args.calls, args.cells)
    rows = asyncio.run(tool_calls(calls))
    print(
        table(
            f"Latency per tool call (ToolRegistry.call), ms ({calls} calls each, interleaved)",
            ["layers", "median", "mean", "p95", "added vs off (median)", "ratio"],
            rows,
        )
    )
    added = next(r[4] for r in rows if r[0] == "both")
    verdict = "meets" if isinstance(added, float) and added <= 0.05 else "MISSES"
    print(f"policy + audit add {added:.4f} ms per call: {verdict} the goal of <= 0.05 ms")
    crows = code_checks(cells)
    print(
        table(
            f"Code checks per 200-line cell, ms ({cells} runs each)",
            [
                "cell",
                "findings",
                "check median",
                "check p95",
                "ast.parse median",
                "check/parse",
                "compile median",
                "seen cell",
            ],
            crows,
        )
    )
    worst = max(float(r[2]) for r in crows)  # type: ignore[arg-type]
    verdict = "meets" if worst <= 1.0 else "MISSES"
    print(f"slowest cell: {worst:.3f} ms: {verdict} the goal of <= 1 ms")


if __name__ == "__main__":
    main()
