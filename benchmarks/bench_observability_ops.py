"""Issue 18: what observability adds to a run's event loop, counted in bytecodes per
function (``sys.settrace`` opcode events on the loop's thread), configuration against
"off", for one run with 5 tool calls as ``bench_observability.py`` times it.

Why: on a machine busier than its cores, the timed overhead moves by a percent between
passes, while these counts do not move at all (the event loop's own functions,
``_run_once`` and ``select``, vary with when answers arrive; observability's do not). Run
it for two trees (``PYTHONPATH=old/src``) to compare what each does per run.

python benchmarks/bench_observability_ops.py [--tool in-process|upstream] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import bench_observability as bench
from _stats import table
from codemode import Session, SubprocessExecutor, ToolRegistry
from codemode.config import parse_servers
from codemode.tools.sources.mcp import MCPSource

NAMES = ("off", "metrics", "metrics+tracing, export process")
OURS: set[str] = set()
"""Keys of functions in codemode's own modules (the benchmark harness excluded)."""


def opcode_counter(total: Counter[str], thread: int) -> Any:
    """A ``sys.settrace`` function counting opcodes per function on ``thread`` only."""

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if threading.get_ident() != thread:
            return None
        frame.f_trace_opcodes = True
        code = frame.f_code
        key = f"{os.path.basename(code.co_filename)}:{code.co_name}"
        if f"{os.sep}codemode{os.sep}" in code.co_filename:
            OURS.add(key)

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode":
                total[key] += 1
            return local

        return local

    return trace


async def counts(tool: str, runs: int) -> dict[str, dict[str, float]]:
    """Bytecodes per ``file:function`` in one run (mean of ``runs``), per configuration."""
    configs = {name: bench.CONFIGS[name]() for name in NAMES}
    switch = bench.Switch(configs)
    source = None
    if tool == "upstream":
        raw = {"command": sys.executable, "args": [str(bench.EDGE)]}
        source = MCPSource("edge", parse_servers({"mcpServers": {"edge": raw}}, env={})["edge"])
        await source.list_tools()
        registry, cell, value = ToolRegistry([source]), bench.UPSTREAM_CELL, bench.UPSTREAM_VALUE
    else:
        registry, cell, value = bench.local_registry(), bench.LOCAL_CELL, bench.LOCAL_VALUE
    tools = bench.tool_switch(switch)
    registry.use(tools, "observe")
    switch.bind(registry, tools)
    session = Session(SubprocessExecutor(), tools=registry)
    session.use(switch.run_hook, "observe")
    session.host.use(switch.host_layer)
    loop_thread = threading.get_ident()
    out: dict[str, dict[str, float]] = {}
    try:
        await session.start()
        for name in NAMES:  # warm up every one
            switch.activate(name)
            for _ in range(30):
                await session.run(cell)
        for name in NAMES:
            switch.activate(name)
            total: Counter[str] = Counter()
            trace = opcode_counter(total, loop_thread)
            for _ in range(runs):
                sys.settrace(trace)
                result = await session.run(cell)
                sys.settrace(None)
                assert result.value == value, result
            out[name] = {k: v / runs for k, v in total.items()}
        for tracing in bench.tracings_of([x for ls in configs.values() for x in ls]):
            tracing.close()
    finally:
        await session.close()
        if source is not None:
            await source.aclose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tool", choices=["in-process", "upstream"], default="in-process")
    ap.add_argument("--runs", type=int, default=5, help="runs counted per configuration")
    args = ap.parse_args()
    per = asyncio.run(counts(args.tool, max(1, args.runs)))
    off = per["off"]
    for name in NAMES[1:]:
        got = per[name]
        diff = {k: got.get(k, 0.0) - off.get(k, 0.0) for k in set(got) | set(off)}
        rows = [[k, v] for k, v in sorted(diff.items(), key=lambda kv: -abs(kv[1])) if abs(v) >= 1]
        ours = sum(v for k, v in diff.items() if k in OURS)
        print(
            table(
                f"{name} vs off, {args.tool} tool: bytecodes a run on the loop's thread "
                f"(all {sum(got.values()):.0f} vs {sum(off.values()):.0f}; codemode's "
                f"functions {ours:+.0f})",
                ["function", "added"],
                rows,
            )
        )


if __name__ == "__main__":
    main()
