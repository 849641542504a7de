"""Start a ``codemode serve --transport http`` process and learn its URL from its log.

Shared by the server tests and the replica tests (imported by path, like
tests/storage/redis_server.py): both need a real process whose stderr is kept for the
failure message and read until the line that names the URL.
"""

from __future__ import annotations

import queue
import re
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PROTOCOL_VERSION = "2025-11-25"
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
"""An MCP initialize request, for tests that speak raw HTTP."""


@dataclass
class Served:
    proc: subprocess.Popen[str]
    url: str
    lines: list[str]
    drain: threading.Thread


def launch_serve(argv: Sequence[str], env: Mapping[str, str], *, timeout: float) -> Served:
    """Run ``argv``; return once it says "serving MCP on <url>", or raise with its log's
    tail when it exits or stays silent for ``timeout`` seconds (it is killed then)."""
    proc = subprocess.Popen(list(argv), env=dict(env), stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    found: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if m := re.search(r"serving MCP on (\S+)", line):
                found.put(m.group(1))
        proc.stderr.close()
        found.put(None)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    try:
        url = found.get(timeout=timeout)
    except queue.Empty:
        url = None
    if url is None:
        proc.kill()
        proc.wait(timeout=30)
        thread.join(timeout=10)
        raise RuntimeError("codemode serve did not start:\n" + "".join(lines[-30:]))
    return Served(proc, url, lines, thread)
