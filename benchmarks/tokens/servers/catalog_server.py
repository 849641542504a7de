"""One server of the wide catalog: 20 generated tools for the business domain named in argv.

Run: ``python catalog_server.py DOMAIN`` (stdio). The tool specs come from
``benchdata.catalog_tools``; each tool answers with a small deterministic record whose
shape it declares (an output schema).
"""

from __future__ import annotations

import inspect
import sys
from typing import Annotated, Any, Literal

from benchdata import catalog_result, catalog_tools
from mcp.server import MCPServer
from pydantic import Field
from typing_extensions import TypedDict


class StockLevel(TypedDict):
    sku: str
    warehouse: str
    on_hand: int
    reserved: int
    available: int
    updated_at: str


class Shipment(TypedDict):
    shipment_id: str
    status: Literal["booked"]
    carrier: str
    eta: str
    sku: str
    quantity: int
    warehouse: str
    customer_id: str


class Record(TypedDict):
    ok: bool
    tool: str
    id: str
    args: dict[str, Any]


_RESULTS: dict[str, Any] = {"get_stock_level": StockLevel, "create_shipment": Shipment}

_TYPES: dict[str, Any] = {"string": str, "integer": int, "boolean": bool, "array": list[str]}


def _function(domain: str, spec: dict[str, Any]) -> Any:
    def call(**kwargs: Any) -> Any:
        return catalog_result(
            domain, spec["name"], {k: v for k, v in kwargs.items() if v is not None}
        )

    params = []
    for pname, p in spec["params"].items():
        base = Literal[tuple(p["enum"])] if p["enum"] else _TYPES[p["type"]]  # type: ignore[misc]
        typ = base if p["required"] else base | None
        annotation = Annotated[typ, Field(description=p["description"])]
        default = inspect.Parameter.empty if p["required"] else None
        params.append(
            inspect.Parameter(
                pname, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
            )
        )
    result = _RESULTS.get(spec["name"], Record)
    call.__signature__ = inspect.Signature(params, return_annotation=result)  # type: ignore[attr-defined]
    call.__name__ = spec["name"]
    return call


def build(domain: str) -> MCPServer:
    server = MCPServer(domain, instructions=f"The {domain.replace('_', ' ')} system.")
    for spec in catalog_tools(domain):
        server.add_tool(_function(domain, spec), name=spec["name"], description=spec["description"])
    return server


if __name__ == "__main__":
    build(sys.argv[1]).run("stdio")
