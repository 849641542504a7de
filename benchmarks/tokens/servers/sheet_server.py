"""Spreadsheet MCP server: one large orders sheet; reading it returns every row.

Every tool declares its result's shape (an output schema). Run: ``python sheet_server.py
[--rows N]`` (stdio).
"""

from __future__ import annotations

import argparse

from benchdata import SHEET_COLUMNS, sheet_rows
from mcp.server import MCPServer
from typing_extensions import TypedDict

SHEET_ID = "orders-2026"


class SheetInfo(TypedDict):
    sheet_id: str
    title: str
    columns: list[str]
    rows: int


class SheetList(TypedDict):
    sheets: list[SheetInfo]


class Sheet(TypedDict):
    sheet_id: str
    columns: list[str]
    rows: list[list[str | int | float]]


def build(n_rows: int) -> MCPServer:
    server = MCPServer("sheets", instructions="Spreadsheets of the sales team.")
    rows = sheet_rows(n_rows)

    @server.tool()
    def list_sheets() -> SheetList:
        """List spreadsheets with their id, title, columns and row count."""
        sheet = SheetInfo(
            sheet_id=SHEET_ID, title="Orders 2026", columns=SHEET_COLUMNS, rows=len(rows)
        )
        return {"sheets": [sheet]}

    @server.tool()
    def get_sheet(sheet_id: str) -> Sheet:
        """Get all rows of a spreadsheet: its column names and the rows as lists of cell values."""
        if sheet_id != SHEET_ID:
            raise ValueError(f"no sheet {sheet_id!r}")
        return Sheet(sheet_id=SHEET_ID, columns=SHEET_COLUMNS, rows=rows)

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=10_000)
    build(parser.parse_args().rows).run("stdio")
