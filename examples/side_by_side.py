"""The same task done by direct tool calls and by code mode, with the tokens each costs.

    .venv/bin/python examples/side_by_side.py        # [--profile all|core|minimal]

Task: in a 2,000-row sales file, find the three largest deals of the north region and
record them in a knowledge graph. Two real MCP servers: filesystem and memory.

- **direct**: a tool-calling agent holds every tool definition of both servers, calls
  ``read_text_file`` (the whole file enters its context), then ``create_entities``.
- **code mode**: a client of ``codemode serve`` searches for the two tools, reads their
  signatures, and sends one piece of code; only what the code prints comes back.

Both agents are scripted (no LLM) and really call the servers; every byte that passes
through each one's context is counted with tiktoken's ``o200k_base`` (codemode's token
benchmark engine, ``codemode bench tokens``, with its hindsight check: a script may only
use what its transcript has shown it). Offline, point ``TIKTOKEN_CACHE_DIR`` at a folder
holding the tokenizer file (see the README).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import os
import random
from pathlib import Path

from _support import banner, npm_server, scratch

from codemode.bench.runner import run_codemode, run_direct
from codemode.bench.scenarios import Scenario, discover, run_code
from codemode.bench.tokens import PROFILES, Agent, ScenarioResult, Transcript, check_tokenizer


def write_sales(path: Path, rows: int = 2_000) -> None:
    rng = random.Random(11)
    lines = ["id,customer,region,amount"]
    for i in range(rows):
        region = rng.choice(["north", "south", "east", "west"])
        lines.append(f"{i},customer-{i:04d},{region},{rng.randint(100, 99_000)}")
    path.write_text("\n".join(lines) + "\n")


def scenario(sales: Path) -> Scenario:
    task = (
        f"In the file {sales} (columns id,customer,region,amount), find the 3 largest deals "
        "of the north region and record each one in the knowledge graph as an entity of "
        "type deal."
    )

    async def direct(agent: Agent) -> Transcript:
        (text,) = await agent.turn(("files__read_text_file", {"path": str(sales)}))
        rows = list(csv.DictReader(io.StringIO(text)))
        north = [r for r in rows if r["region"] == "north"]
        top = sorted(north, key=lambda r: -int(r["amount"]))[:3]
        entities = [
            {"name": f"deal {r['id']}", "entityType": "deal",
             "observations": [f"{r['customer']} {r['amount']}"]}
            for r in top
        ]  # fmt: skip
        await agent.turn(("memory__create_entities", {"entities": entities}))
        return agent.answer("Recorded: " + ", ".join(f"deal {r['id']}" for r in top))

    code = (
        f"text = tools.files.read_text_file(path={str(sales)!r})['content']\n"
        "rows = [line.split(',') for line in text.splitlines()[1:]]\n"
        "top = sorted((r for r in rows if r[2] == 'north'), key=lambda r: -int(r[3]))[:3]\n"
        "tools.memory.create_entities(entities=[\n"
        "    {'name': f'deal {r[0]}', 'entityType': 'deal', 'observations': [f'{r[1]} {r[3]}']}\n"
        "    for r in top])\n"
        "print(', '.join(f'deal {r[0]}' for r in top))"
    )

    async def codemode(agent: Agent, profile: str) -> Transcript:
        await discover(
            agent,
            profile,
            (("read a text file",), ["files.read_text_file"]),
            (("create entities in the knowledge graph",), ["memory.create_entities"]),
        )
        printed = await run_code(agent, code)
        return agent.answer("Recorded: " + printed.strip())

    return Scenario("side-by-side", "top 3 north deals into the graph", task, direct, codemode)


def show_transcript(transcript: Transcript) -> None:
    print(f"  {'turn':>4}  {'what':<12} {'tokens':>7}  text")
    for e in transcript.entries:
        text = " ".join(e.text.split())
        print(f"  {e.turn:>4}  {e.kind:<12} {e.tokens:>7,}  {text[:70]}")


async def main(profile: str) -> None:
    check_tokenizer()
    executor = os.environ.get("CODEMODE_EXECUTOR", "sandbox")
    with scratch("side-by-side") as root:
        data = root / "data"
        data.mkdir()
        sales = data / "sales.csv"
        write_sales(sales)
        catalog = {
            "files": npm_server("server-filesystem", str(data)),
            "memory": npm_server("server-memory", env={"MEMORY_FILE_PATH": str(root / "m.jsonl")}),
        }
        task = scenario(sales)
        direct, n_tools = await run_direct(task, catalog, root)
        code = await run_codemode(task, catalog, root, executor, profile)

    banner(f"Direct tool calls ({n_tools} tool definitions up front)")
    show_transcript(direct)
    banner(f"Code mode (codemode serve --tools {profile})")
    show_transcript(code)

    result = ScenarioResult.from_transcripts(task.name, task.title, direct, code, profile)
    banner("Side by side (tokens: o200k_base)")
    rows = [
        ("context at the end", result.tokens_direct, result.tokens_codemode),
        ("input billed, all turns", result.input_tokens_billed_direct,
         result.input_tokens_billed_codemode),
        ("model round trips", result.round_trips_direct, result.round_trips_codemode),
    ]  # fmt: skip
    print(f"  {'':<24} {'direct':>10} {'code mode':>10}")
    for label, d, c in rows:
        print(f"  {label:<24} {d:>10,} {c:>10,}")
    print(f"  reduction of the context: {result.reduction_pct}%")
    print(f"  both answered: {direct.entries[-1].text} | {code.entries[-1].text}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--profile", choices=PROFILES, default="minimal")
    asyncio.run(main(parser.parse_args().profile))
