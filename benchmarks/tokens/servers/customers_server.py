"""Customer database MCP server: customers with e-mail addresses and phone numbers (PII).

Run: ``python customers_server.py [--customers N]`` (stdio).
"""

from __future__ import annotations

import argparse
from typing import Any

from benchdata import customers
from mcp.server import MCPServer


def build(n: int) -> MCPServer:
    server = MCPServer("customers", instructions="The customer database of the support team.")
    people = customers(n)

    @server.tool()
    def list_customers(segment: str | None = None) -> dict[str, Any]:
        """List customers with id, name, email, phone, company and segment."""
        return {"customers": [p for p in people if segment is None or p["segment"] == segment]}

    @server.tool()
    def get_customer(customer_id: str) -> dict[str, Any]:
        """Get one customer by id."""
        for p in people:
            if p["id"] == customer_id:
                return p
        raise ValueError(f"no customer {customer_id!r}")

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--customers", type=int, default=100)
    build(parser.parse_args().customers).run("stdio")
