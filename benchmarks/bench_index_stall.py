"""Issue 11 (item 8) figures: the host under the skill-index attack.

One session saves 40 skills of 250 KB and searches them (the index is rebuilt); meanwhile a
ticker measures how late the host's event loop wakes up (its stall) and a bystander session
runs ``1 + 1`` in a loop. Printed: the loop's worst and p95 stall, the bystander's round
trips, the search's wall time and the host process's peak RSS. Run it against another
checkout to compare (``PYTHONPATH=/other/src python benchmarks/bench_index_stall.py``).

    python benchmarks/bench_index_stall.py [--skills 40] [--kb 250] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _stats import median, pct, table
from codemode import Session, SubprocessExecutor
from codemode.memory import Memory
from codemode.storage import FileStorage

WORDS = [f"w{i}x{j}" for i in range(400) for j in range(25)]


def skill_code(i: int, size: int) -> str:
    rnd = random.Random(i)
    lines, n = [], 0
    while n < size - 200:
        line = "# " + " ".join(rnd.choice(WORDS) for _ in range(12))
        lines.append(line)
        n += len(line) + 1
    return f"def run():\n    '''Skill {i}.'''\n" + "\n".join(lines) + "\n    return 1\n"


async def ticker(stop: asyncio.Event, stalls: list[float]) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t = loop.time()
        await asyncio.sleep(0.005)
        stalls.append((loop.time() - t - 0.005) * 1000)


async def bystander(s: Session, stop: asyncio.Event, lat: list[float]) -> None:
    while not stop.is_set():
        t = time.perf_counter()
        r = await s.run("1 + 1", timeout=120)
        assert r.value == 2, r.to_text()
        lat.append((time.perf_counter() - t) * 1000)


async def one_round(n: int, kb: int, tag: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory(FileStorage(tmp))
        maker = Session(SubprocessExecutor(pool_size=0), memory=memory)
        other = Session(SubprocessExecutor(pool_size=0))
        async with maker, other:
            codes = [skill_code(tag * 1000 + i, kb * 1000) for i in range(n)]
            stop = asyncio.Event()
            stalls: list[float] = []
            lat: list[float] = []
            tasks = [asyncio.create_task(ticker(stop, stalls)),
                     asyncio.create_task(bystander(other, stop, lat))]  # fmt: skip
            await asyncio.sleep(0.3)
            t0 = time.perf_counter()
            for i, code in enumerate(codes):
                r = await maker.run(f"skills.create('big{i}', {code!r}, 'big skill {i}')", 120)
                assert r.is_ok, r.to_text()
            t1 = time.perf_counter()
            r = await maker.run("skills.search('w7x3 w9x1', limit=3)", timeout=300)
            t2 = time.perf_counter()
            assert r.is_ok, r.to_text()
            stop.set()
            await asyncio.gather(*tasks)
    return {
        "stall_max": max(stalls),
        "stall_p95": pct(stalls, 95),
        "by_p50": median(lat),
        "by_max": max(lat),
        "by_runs": len(lat),
        "save_s": t1 - t0,
        "search_s": t2 - t1,
    }


async def main(args: argparse.Namespace) -> None:
    rows = [await one_round(args.skills, args.kb, i) for i in range(args.rounds)]
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    import codemode

    where = os.path.dirname(os.path.dirname(codemode.__file__))
    title = (
        f"{args.skills} skills x {args.kb} KB saved then searched by one session "
        f"(code from {where}; load {os.getloadavg()[0]:.1f})"
    )
    head = ["round", "loop stall max ms", "stall p95 ms", "bystander p50 ms",
            "bystander max ms", "bystander runs", "save s", "search s"]  # fmt: skip
    body = [
        [i + 1, r["stall_max"], r["stall_p95"], r["by_p50"], r["by_max"], int(r["by_runs"]),
         r["save_s"], r["search_s"]]
        for i, r in enumerate(rows)
    ]  # fmt: skip
    print(table(title, head, body))
    print(f"host process peak RSS: {rss_mb:.0f} MB")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--skills", type=int, default=40)
    p.add_argument("--kb", type=int, default=250)
    p.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(p.parse_args()))
