"""Discovery over 10,000 synthetic tool specs: index build time and search latency.

Target: ``registry.search`` p50 <= 2 ms. The baseline, measured in the same run, is a
plain substring scan over names and descriptions (what discovery costs without an index).

    .venv/bin/python benchmarks/bench_discovery.py [--tools 10000] [--queries 400] [--quick]

``--quick`` (1,000 tools, 100 queries) is the smoke run CI makes. Ranking quality on real
servers' tools is the other discovery benchmark: ``codemode bench discovery``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from typing import Any

from codemode.tools import ToolRegistry, ToolSpec
from codemode.tools.spec import ToolCallResult

VERBS = [
    "get",
    "list",
    "create",
    "delete",
    "update",
    "search",
    "send",
    "read",
    "write",
    "sync",
    "archive",
    "export",
    "import",
    "merge",
    "close",
    "open",
    "assign",
    "tag",
    "move",
    "copy",
]
NOUNS = [
    "issue",
    "file",
    "user",
    "invoice",
    "message",
    "event",
    "ticket",
    "repo",
    "order",
    "page",
    "comment",
    "branch",
    "customer",
    "payment",
    "calendar",
    "folder",
    "label",
    "channel",
    "report",
    "dataset",
    "model",
    "deployment",
    "secret",
    "contact",
    "task",
]
WORDS = [
    "fast",
    "remote",
    "cloud",
    "local",
    "secure",
    "batch",
    "daily",
    "shared",
    "archived",
    "draft",
    "public",
    "private",
    "team",
    "project",
    "workspace",
    "billing",
    "audit",
]


def synthetic_specs(n: int, seed: int = 1) -> list[ToolSpec]:
    rnd = random.Random(seed)
    specs = []
    for i in range(n):
        verb, noun = rnd.choice(VERBS), rnd.choice(NOUNS)
        extra = rnd.sample(WORDS, 4)
        props: dict[str, Any] = {f"{noun}_id": {"type": "string"}, "limit": {"type": "integer"}}
        props[rnd.choice(WORDS)] = {"type": "boolean"}
        specs.append(
            ToolSpec(
                server=f"server{i % 100}",
                name=f"{verb}{noun.capitalize()}{i}",
                description=(
                    f"{verb.capitalize()} a {' '.join(extra[:2])} {noun}. "
                    f"Works with {extra[2]} and {extra[3]} {noun}s."
                ),
                input_schema={"type": "object", "properties": props, "required": [f"{noun}_id"]},
            )
        )
    return specs


class StaticSource:
    def __init__(self, name: str, specs: list[ToolSpec]) -> None:
        self.name = name
        self.specs = specs

    async def list_tools(self) -> list[ToolSpec]:
        return self.specs

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> ToolCallResult:
        return ToolCallResult()

    async def aclose(self) -> None:
        pass


def queries(n: int, seed: int = 2) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            out.append(f"{rnd.choice(VERBS)} {rnd.choice(NOUNS)}")
        elif kind == 1:
            out.append(f"{rnd.choice(NOUNS)} {rnd.choice(WORDS)} {rnd.choice(WORDS)}")
        elif kind == 2:
            out.append(f"how do I {rnd.choice(VERBS)} the {rnd.choice(WORDS)} {rnd.choice(NOUNS)}s")
        else:
            out.append(f"{rnd.choice(NOUNS)}_id")
    return out


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


async def main(n_tools: int, n_queries: int) -> None:
    specs = synthetic_specs(n_tools)
    by_server: dict[str, list[ToolSpec]] = {}
    for s in specs:
        by_server.setdefault(s.server, []).append(s)
    reg = ToolRegistry([StaticSource(k, v) for k, v in by_server.items()])
    qs = queries(n_queries)

    t0 = time.perf_counter()
    await reg.list()  # listing (cached afterwards)
    t1 = time.perf_counter()
    await reg.search("warm up")  # builds the BM25 index
    t2 = time.perf_counter()

    rows = []
    for detail in ("name", "description", "full"):
        lat = []
        for q in qs:
            a = time.perf_counter()
            await reg.search(q, detail=detail, limit=10)
            lat.append((time.perf_counter() - a) * 1e3)
        rows.append((f"registry.search detail={detail}", lat))

    # Baseline in the same run: substring scan of every name and description.
    docs = [(f"{s.server}.{s.name}", f"{s.name} {s.description}".lower()) for s in specs]
    lat = []
    for q in qs:
        a = time.perf_counter()
        words = q.lower().split()
        hits = [n for n, text in docs if any(w in text for w in words)][:10]
        lat.append((time.perf_counter() - a) * 1e3)
        del hits
    rows.append(("baseline: substring scan", lat))

    print(f"discovery over {n_tools:,} tool specs, {n_queries} queries")
    print()
    print(f"{'step':<34} {'time ms':>10}")
    print(f"{'list (lazy, once)':<34} {(t1 - t0) * 1e3:>10.1f}")
    print(f"{'index build (first search)':<34} {(t2 - t1) * 1e3:>10.1f}")
    print()
    base = statistics.median(rows[-1][1])
    print(f"{'search':<34} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'p50 vs baseline':>16}")
    for name, lat in rows:
        p50 = statistics.median(lat)
        print(f"{name:<34} {p50:>8.3f} {pct(lat, 95):>8.3f} {max(lat):>8.3f} {p50 / base:>15.2f}x")
    print()
    target = statistics.median(rows[0][1])
    print(
        f"target p50 <= 2 ms (detail=name): {'met' if target <= 2 else 'NOT met'} ({target:.3f} ms)"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tools", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--quick", action="store_true", help="1,000 tools, 100 queries")
    args = ap.parse_args()
    if args.quick:
        args.tools, args.queries = 1_000, 100
    asyncio.run(main(args.tools, args.queries))
