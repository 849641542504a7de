"""CRM MCP server: records, notes and attachments, and a contact import (the article's Salesforce).

Every tool declares its result's shape (an output schema). Run: ``python crm_server.py``
(stdio). State lives in memory for the life of the process; with ``CRM_RECEIVED=<file>``
every imported contact is also appended to that file (the privacy scenarios check what a
sink really received).
"""

from __future__ import annotations

import json
import os
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from pydantic import BaseModel, Field
from typing_extensions import TypedDict


class Contact(BaseModel):
    name: str
    email: str
    phone: str = ""
    company: str = ""


class RecordInfo(TypedDict):
    record_id: str
    type: str
    name: str
    owner: str


class RecordList(TypedDict):
    records: list[RecordInfo]


class AttachmentRef(TypedDict):
    attachment_id: str
    name: str


class Record(RecordInfo):
    attachments: list[AttachmentRef]


class Attached(TypedDict):
    record_id: str
    attachment_id: str
    name: str
    chars: int
    status: Literal["attached"]


class ImportResult(TypedDict):
    imported: int
    skipped: int
    total_contacts: int


def contacts_as_dicts(contacts: list[Contact]) -> list[dict[str, Any]]:
    return [c.model_dump() for c in contacts]


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
    def find_records(query: str, object_type: str | None = None) -> RecordList:
        """Find CRM records whose name contains the query; optionally of one object type."""
        q = query.lower()
        hits = [
            RecordInfo(record_id=k, **v)
            for k, v in records.items()
            if q in v["name"].lower() and (object_type is None or v["type"] == object_type)
        ]
        return {"records": hits}

    @server.tool()
    def get_record(record_id: str) -> Record:
        """Get one CRM record with its fields and a list of its attachments (without content)."""
        if record_id not in records:
            raise ValueError(f"no record {record_id!r}")
        files = [
            AttachmentRef(attachment_id=a["attachment_id"], name=a["name"])
            for a in attachments.get(record_id, [])
        ]
        return Record(record_id=record_id, **records[record_id], attachments=files)

    @server.tool()
    def attach_document(
        record_id: str,
        name: Annotated[str, Field(description="File name shown in the CRM.")],
        content: Annotated[str, Field(description="Full text of the document to attach.")],
    ) -> Attached:
        """Attach a text document (meeting notes, transcript, contract) to a CRM record."""
        if record_id not in records:
            raise ValueError(f"no record {record_id!r}")
        items = attachments.setdefault(record_id, [])
        att_id = f"ATT-{len(items) + 1:04d}"
        items.append({"attachment_id": att_id, "name": name, "content": content})
        return Attached(
            record_id=record_id,
            attachment_id=att_id,
            name=name,
            chars=len(content),
            status="attached",
        )

    @server.tool()
    def add_note(record_id: str, text: str) -> Attached:
        """Add a short note to a CRM record."""
        return attach_document(record_id, name="note", content=text)

    @server.tool()
    def import_contacts(contacts: list[Contact]) -> ImportResult:
        """Import contacts (name, email, phone, company) into the CRM; skips known e-mails."""
        seen = {c["email"] for c in store}
        new = [c.model_dump() for c in contacts if c.email not in seen]
        store.extend(new)
        if os.environ.get("CRM_RECEIVED"):  # the token benchmark checks what arrived
            with open(os.environ["CRM_RECEIVED"], "a", encoding="utf-8") as fh:
                fh.writelines(json.dumps(c) + "\n" for c in contacts_as_dicts(contacts))
        return ImportResult(
            imported=len(new), skipped=len(contacts) - len(new), total_contacts=len(store)
        )

    return server


if __name__ == "__main__":
    build().run("stdio")
