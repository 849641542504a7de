"""Artifacts: named data that survives sessions (JSON-like values, text or bytes).

The value's type is stored with it, so what comes back is exactly what went in: bytes stay
bytes, text stays text, JSON-like data comes back equal. Values that JSON would silently
change (tuples, sets, non-string keys) are refused instead of being altered. Metadata
(type, size, created, description) is listed without reading any value.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from codemode_worker.protocol import json_like_problem

from ..errors import CorruptRecord, ValidationError
from ..storage.base import RecordInfo, Storage, check_name
from . import formats

KIND = "artifacts"
MAX_DESCRIPTION = 2000


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def check_json_like(value: Any, what: str = "data") -> None:
    """Refuse values that would not come back equal after a JSON round trip."""
    problem = json_like_problem(value, what)
    if problem is not None:
        raise ValidationError(problem)


def encode_value(data: Any) -> tuple[str, bytes | bytearray | memoryview]:
    """(type, payload) for a value; bytes-like values are not copied."""
    if isinstance(data, bytes | bytearray | memoryview):
        return "bytes", data
    if isinstance(data, str):
        return "text", data.encode("utf-8", "surrogatepass")
    check_json_like(data)
    return "json", json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogatepass"
    )


def decode_value(kind: str, payload: bytes) -> Any:
    if kind == "bytes":
        return payload
    if kind == "text":
        return payload.decode("utf-8", "surrogatepass")
    return json.loads(payload.decode("utf-8", "surrogatepass"))


def describe(info: RecordInfo) -> dict[str, Any]:
    m = info.meta
    return {
        "name": info.name,
        "type": m.get("type", "bytes"),
        "size": info.size,
        "created": m.get("created", ""),
        "description": m.get("description", ""),
    }


class Artifacts:
    """Save, load, list and delete artifacts in a ``Storage``."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    async def save(self, name: str, data: Any, *, description: str = "") -> dict[str, Any]:
        check_name(name, "artifact name")
        if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
            raise ValidationError(f"description must be a str of at most {MAX_DESCRIPTION} chars")
        kind, payload = encode_value(data)
        meta = formats.stamp(KIND, {"type": kind, "created": now_iso(), "description": description})
        return describe(await self.storage.put(KIND, name, payload, meta))

    async def load(self, name: str) -> Any:
        info, payload = formats.upgrade(
            *await self.storage.read(KIND, check_name(name, "artifact name"))
        )
        return decode_value(str(info.meta.get("type", "bytes")), payload)

    async def info(self, name: str) -> dict[str, Any]:
        info = await self.storage.info(KIND, check_name(name, "artifact name"))
        return describe(formats.upgrade(info)[0])

    async def stream(self, name: str) -> tuple[dict[str, Any], AsyncIterator[bytes]]:
        """The stored bytes in chunks (UTF-8 for text and JSON), for very large values."""
        info, chunks = await self.storage.stream(KIND, check_name(name, "artifact name"))
        problem = formats.newer(info)
        if problem is not None:
            raise CorruptRecord(problem)
        return describe(info), chunks

    async def list(self) -> list[dict[str, Any]]:
        """Readable artifacts; unreadable ones are listed with an ``error``."""
        listing = await self.storage.list(KIND)
        records, newer = formats.readable(listing.records)
        out = [describe(r) for r in records]
        out += [{"name": b.name, "type": "unreadable", "error": b.message} for b in listing.bad]
        out += [{"name": n, "type": "unreadable", "error": why} for n, why in newer]
        return out

    async def exists(self, name: str) -> bool:
        return await self.storage.exists(KIND, check_name(name, "artifact name"))

    async def delete(self, name: str) -> bool:
        return await self.storage.delete(KIND, check_name(name, "artifact name"))
