"""Issue 17 figures: the workflow engine's overhead per step against the same steps written
as one ``run_code``, and the time to resume a crashed 1,000-step workflow.

python benchmarks/bench_workflows.py [--steps 200] [--repeat 7] [--resume-steps 1000]
python benchmarks/bench_workflows.py --quick      # CI: small sizes, same tables

Per-step overhead = (workflow time - one run_code time) / steps, per repetition (negative
when the workflow is faster: one run_code pays a worker round trip the host-side steps do
not); ms/step is the workflow's whole time per step. Every step is journaled (two appends
to the run's JSON-lines file). Rows:

- tool steps: ``tool: local.inc`` (an in-process async Python tool) vs one run_code calling
  ``tools.local.inc`` in a loop (calls cross the worker bridge);
- set steps: ``set: {x: "${i + 1}"}`` (engine, expressions, journal only) vs one run_code
  doing the same assignments;
- code steps: ``code: "x = x + 1"`` (one worker round trip each) vs one run_code with the
  same lines.

Resume: a run of N ``set`` steps is killed after its last step started (the journal is cut
there, as a SIGKILL leaves it); resume replays N-1 finished steps and runs the last.
Shown beside the fresh run of the same workflow, measured in the same process.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _stats import median, pct, table
from codemode import Session, SubprocessExecutor, Workspace
from codemode.workflows import aresume_workflow, arun_workflow


async def inc(i: int) -> int:
    """Async: a sync tool runs in a thread, whose dispatch would dominate both columns."""
    return i + 1


def workflows(kind: str, n: int) -> tuple[dict[str, Any], str]:
    """The workflow of ``n`` steps of ``kind`` and the one run_code doing the same."""
    if kind == "tool":
        steps = [{"tool": "local.inc", "args": {"i": i}} for i in range(n)]
        code = f"for i in range({n}):\n    tools.local.inc(i=i)"
    elif kind == "set":
        steps = [{"set": {"x": "${" + str(i) + " + 1}"}} for i in range(n)]
        code = "\n".join(f"x = {i} + 1" for i in range(n))
    else:
        steps = [{"code": "x = x + 1"} for _ in range(n)]
        code = "\n".join("x = x + 1" for _ in range(n))
    return {"name": f"bench-{kind}", "steps": steps}, code


async def overhead(ws: Workspace, kind: str, n: int, repeat: int) -> list[object]:
    wf, code = workflows(kind, n)
    per_step: list[float] = []
    flows: list[float] = []
    ones: list[float] = []
    async with Session.for_workspace(ws, executor=SubprocessExecutor()) as s:
        s.register_tool(inc)
        await s.run("x = 0")
        for _ in range(repeat):
            t0 = time.perf_counter()
            result = await arun_workflow(wf, workspace=ws, session=s)
            t1 = time.perf_counter()
            assert result.ok, result.error
            run = await s.run("x = 0\n" + code)
            t2 = time.perf_counter()
            assert run.error is None, run.error
            flows.append(t1 - t0)
            ones.append(t2 - t1)
            per_step.append((t1 - t0 - (t2 - t1)) / n * 1000)
    return [f"{kind} steps", n, median(flows) * 1000, median(flows) / n * 1000,
            median(ones) * 1000, median(per_step), pct(per_step, 95),
            median(flows) / median(ones)]  # fmt: skip


async def resume(ws: Workspace, n: int, repeat: int) -> list[list[object]]:
    wf, _ = workflows("set", n)
    fresh: list[float] = []
    resumed: list[float] = []
    runs = ws.path / "workflows" / "runs"
    async with Session.for_workspace(ws, executor=SubprocessExecutor()) as s:
        for _ in range(repeat):
            t0 = time.perf_counter()
            first = await arun_workflow(wf, workspace=ws, session=s)
            fresh.append(time.perf_counter() - t0)
            assert first.ok, first.error
            journal = runs / f"{first.run_id}.jsonl"
            lines = journal.read_bytes().splitlines(keepends=True)
            last_start = max(i for i, line in enumerate(lines) if b'"ev":"start"' in line)
            journal.write_bytes(b"".join(lines[: last_start + 1]))  # killed inside the last step
            replayed = 0

            def count(event: Any) -> None:
                nonlocal replayed
                replayed += event.kind == "replay"

            t1 = time.perf_counter()
            again = await aresume_workflow(first.run_id, workspace=ws, session=s, on_event=count)
            resumed.append(time.perf_counter() - t1)
            assert again.ok and replayed == n - 1, (again.error, replayed)
    crash = f"resume after a crash at step {n}"
    return [
        [f"fresh run, {n} steps", median(fresh) * 1000, pct(fresh, 95) * 1000, 1.0],
        [crash, median(resumed) * 1000, pct(resumed, 95) * 1000, median(resumed) / median(fresh)],
    ]


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--resume-steps", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="small sizes (CI)")
    args = ap.parse_args()
    if args.quick:
        args.steps, args.repeat, args.resume_steps = 20, 2, 100
    with tempfile.TemporaryDirectory(prefix="bench-wf-") as tmp:
        (Path(tmp) / "mcp.json").write_text('{"mcpServers": {}}')
        ws = Workspace.open(tmp)
        kinds = ("tool", "set", "code")
        rows = [await overhead(ws, kind, args.steps, args.repeat) for kind in kinds]
        print(table(
            f"Workflow engine overhead per step ({args.repeat} repetitions; goal <= 1 ms)",
            ["steps", "n", "workflow ms", "ms/step", "one run_code ms",
             "overhead ms/step (median)", "p95", "ratio"],
            rows,
        ))  # fmt: skip
        print(table(
            f"Resume ({args.repeat} repetitions)",
            ["run", "median ms", "p95 ms", "ratio to fresh"],
            await resume(ws, args.resume_steps, args.repeat),
        ))  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
