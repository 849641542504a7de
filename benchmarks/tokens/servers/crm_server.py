"""CRM MCP server: records, notes and attachments, and a contact import (the article's Salesforce).

Run: ``python crm_server.py`` (stdio). State lives in memory for the life of the process.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from pydantic import BaseModel, Field


class Contact(BaseModel):
    name: str
    email: str
    phone: str = ""
    company: str = ""


def build() -> MCPServer:
    server = MCPServer("crm", instructions="A CRM with accounts, meetings, notes and contacts.")
    records: dict[str, dict[str, Any]] = {
        "00Q5f000001abcXYZ": {
            "type": "SalesMeeting",
            "name": "Acme x Northwind QBR",
            "owner": "dana",
        },
        "00Q5f000001abcXZZ": {"type": "Account", "name": "Northwind Traders", "owner": "marcus"},
    }
    attachments: dict[str, list[dict[str, Any]]] = {}
    store: list[dict[str, Any]] = []

    @server.tool()
    def find_records(query: str, object_type: str | None = None) -> dict[str, Any]:
        """Find CRM records whose name contains the query; optionally of one object type."""
        q = query.lower()
        hits = [
            {"record_id": k, **v}
            for k, v in records.items()
            if q in v["name"].lower() and (object_type is None or v["type"] == object_type)
        ]
        return {"records": hits}

    @server.tool()
    def get_record(record_id: str) -> dict[str, Any]:
        """Get one CRM record with its fields and a list of its attachments (without content)."""
        if record_id not in records:
            raise ValueError(f"no record {record_id!r}")
        files = [
            {"attachment_id": a["attachment_id"], "name": a["name"]}
            for a in attachments.get(record_id, [])
        ]
        return {"record_id": record_id, **records[record_id], "attachments": files}

    @server.tool()
    def attach_document(
        record_id: str,
        name: Annotated[str, Field(description="File name shown in the CRM.")],
        content: Annotated[str, Field(description="Full text of the document to attach.")],
    ) -> dict[str, Any]:
        """Attach a text document (meeting notes, transcript, contract) to a CRM record."""
        if record_id not in records:
            raise ValueError(f"no record {record_id!r}")
        items = attachments.setdefault(record_id, [])
        att = {"attachment_id": f"ATT-{len(items) + 1:04d}", "name": name, "chars": len(content)}
        items.append({**att, "content": content})
        return {"record_id": record_id, **att, "status": "attached"}

    @server.tool()
    def add_note(record_id: str, text: str) -> dict[str, Any]:
        """Add a short note to a CRM record."""
        return attach_document(record_id, name="note", content=text)

    @server.tool()
    def import_contacts(contacts: list[Contact]) -> dict[str, Any]:
        """Import contacts (name, email, phone, company) into the CRM; skips known e-mails."""
        seen = {c["email"] for c in store}
        new = [c.model_dump() for c in contacts if c.email not in seen]
        store.extend(new)
        return {
            "imported": len(new),
            "skipped": len(contacts) - len(new),
            "total_contacts": len(store),
        }

    return server


if __name__ == "__main__":
    build().run("stdio")
