"""Document store MCP server: holds one long meeting transcript (the article's Google Drive).

Every tool declares its result's shape (an output schema), as real servers increasingly
do: the code-mode agent learns result keys from ``get_tool``, never from hindsight.

Run: ``python docs_server.py [--words N]`` (stdio).
"""

from __future__ import annotations

import argparse

from benchdata import meeting_transcript
from mcp.server import MCPServer
from typing_extensions import TypedDict

DOC_ID = "mtg-2026-11-20-acme-northwind"


class DocumentInfo(TypedDict):
    id: str
    title: str
    modified: str


class DocumentList(TypedDict):
    documents: list[DocumentInfo]


def build(words: int) -> MCPServer:
    server = MCPServer("docs", instructions="A document store with meeting notes and files.")
    transcript = meeting_transcript(words)
    docs = {
        DOC_ID: {"title": "Acme x Northwind QBR - transcript", "modified": "2026-11-20"},
        "policy-travel-2026": {"title": "Travel policy 2026", "modified": "2026-01-04"},
        "handbook-sales": {"title": "Sales handbook", "modified": "2025-09-12"},
    }

    @server.tool()
    def list_documents(folder: str = "/") -> DocumentList:
        """List documents in a folder with their id, title and modification date."""
        return {"documents": [DocumentInfo(id=k, **v) for k, v in docs.items()]}

    @server.tool()
    def search_documents(query: str, limit: int = 10) -> DocumentList:
        """Search documents by words in their title; returns id, title and date."""
        words = query.lower().split()
        hits = [
            DocumentInfo(id=k, **v)
            for k, v in docs.items()
            if any(w in v["title"].lower() for w in words)
        ]
        return {"documents": hits[:limit]}

    @server.tool()
    def get_document(document_id: str) -> str:
        """Get the full text content of a document by its id."""
        if document_id == DOC_ID:
            return transcript
        if document_id in docs:
            return f"{docs[document_id]['title']}\n\n(This document is short.)\n"
        raise ValueError(f"no document {document_id!r}")

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--words", type=int, default=10_000)
    build(parser.parse_args().words).run("stdio")
