"""An MCP server (stdio) returning N customer rows, for the privacy latency benchmark.

python benchmarks/privacy/rows_server.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp.server import MCPServer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from crm_data import table_rows

server = MCPServer("crm")


@server.tool()
def rows(n: int = 10_000, start: int = 0) -> list[dict[str, Any]]:
    """n customers of the CRM, from the start-th on."""
    return table_rows(n, start=start)


if __name__ == "__main__":
    server.run("stdio")
