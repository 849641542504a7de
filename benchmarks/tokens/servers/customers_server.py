"""Customer database MCP server: customers with e-mail addresses and phone numbers (PII).

Every tool declares its result's shape (an output schema). Run: ``python customers_server.py
[--customers N]`` (stdio).
"""

from __future__ import annotations

import argparse

from benchdata import customers
from mcp.server import MCPServer
from typing_extensions import TypedDict


class Customer(TypedDict):
    id: str
    name: str
    email: str
    phone: str
    company: str
    segment: str


class CustomerList(TypedDict):
    customers: list[Customer]


def build(n: int) -> MCPServer:
    server = MCPServer("customers", instructions="The customer database of the support team.")
    people = customers(n)

    @server.tool()
    def list_customers(segment: str | None = None) -> CustomerList:
        """List customers with id, name, email, phone, company and segment."""
        chosen = [p for p in people if segment is None or p["segment"] == segment]
        return {"customers": [Customer(**p) for p in chosen]}

    @server.tool()
    def get_customer(customer_id: str) -> Customer:
        """Get one customer by id."""
        for p in people:
            if p["id"] == customer_id:
                return Customer(**p)
        raise ValueError(f"no customer {customer_id!r}")

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--customers", type=int, default=100)
    build(parser.parse_args().customers).run("stdio")
