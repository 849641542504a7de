"""Receiving one large message from a stdio MCP server: the SDK's reader against codemode's.

The SDK's ``stdio_client`` re-joins its buffer with every chunk of an unfinished line
(``(buffer + chunk).split("\\n")``), so a message of n bytes costs O(n^2 / chunk) copying;
codemode's ``bounded_stdio_client`` splits each chunk once and keeps the unfinished part in
one ``bytearray`` (and gives up past ``max_message_bytes``). Both run in this process, in
the same run, against the same server (``tests/fixtures/servers/hostile_server.py``, tool
``flood``: a text result of N MiB, one JSON-RPC line); the time is that of ``call_tool``.

python benchmarks/bench_stdio_reader.py [--sizes 1,4,16,30] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stats import median, pct, table
from codemode.tools.sources.mcp.stdio import bounded_stdio_client

SERVER = (
    Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "servers" / "hostile_server.py"
)
PARAMS = StdioServerParameters(command=sys.executable, args=[str(SERVER)])


def transport(kind: str) -> Any:
    if kind == "sdk":
        return PARAMS
    devnull = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    cm: AbstractAsyncContextManager[Any] = bounded_stdio_client(
        PARAMS, devnull, max_message=1 << 30
    )
    return cm


async def measure(kind: str, mib: int, repeat: int) -> list[float]:
    times = []
    async with Client(transport(kind)) as client:
        await client.call_tool("flood", {"mib": 1})  # warm: imports, first allocation
        for _ in range(repeat):
            start = time.perf_counter()
            result = await client.call_tool("flood", {"mib": mib})
            times.append(time.perf_counter() - start)
            assert len(result.content[0].text) == mib << 20  # type: ignore[union-attr]
    return times


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,16,30")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for mib in (int(s) for s in args.sizes.split(",")):
        sdk = await measure("sdk", mib, args.repeat)
        ours = await measure("codemode", mib, args.repeat)
        rows.append(
            [
                f"{mib} MiB",
                median(sdk),
                pct(sdk, 95),
                median(ours),
                pct(ours, 95),
                f"{median(sdk) / median(ours):.2f}x",
            ]
        )
    load = os.getloadavg()[0]
    print(
        table(
            f"call_tool('flood') over stdio, seconds (repeat {args.repeat}, load {load:.1f})",
            [
                "message",
                "SDK median",
                "SDK p95",
                "codemode median",
                "codemode p95",
                "SDK / codemode",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    anyio.run(main)
