"""State: one small JSON document per workspace, shared by code, SDK and MCP server.

Every change is a locked read-modify-write, so two sessions updating different keys at
the same time both keep their change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import CorruptRecord, NotFound, ValidationError
from ..storage.base import Storage, check_name
from . import formats
from .artifacts import check_json_like

KIND = "state"
NAME = "state"
MAX_STATE = 1 << 20


class State:
    """The workspace's state document (a JSON object)."""

    def __init__(self, storage: Storage, name: str = NAME) -> None:
        self.storage = storage
        self.name = check_name(name, "state document name")

    async def _load(self) -> dict[str, Any]:
        try:
            _, raw = formats.upgrade(*await self.storage.read(KIND, self.name))
        except NotFound:
            return {}
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise CorruptRecord(f"state document {self.name!r} is not JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise CorruptRecord(f"state document {self.name!r} is not a JSON object")
        return doc

    async def _store(self, doc: dict[str, Any]) -> None:
        check_json_like(doc, "state")
        raw = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
        if len(raw) > MAX_STATE:
            raise ValidationError(
                f"state would be {len(raw)} bytes; keep it under {MAX_STATE} "
                "and save big data as an artifact"
            )
        await self.storage.put(KIND, self.name, raw, formats.stamp(KIND, {"keys": len(doc)}))

    async def exists(self) -> bool:
        """Whether the document was ever saved (a missing one reads as ``{}``)."""
        return await self.storage.exists(KIND, self.name)

    async def get(self, key: str | None = None, default: Any = None) -> Any:
        doc = await self._load()
        return doc if key is None else doc.get(key, default)

    async def set(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise ValidationError(f"state keys are strings, not {type(key).__name__}")
        async with self.storage.lock(KIND, self.name):
            doc = await self._load()
            doc[key] = value
            await self._store(doc)

    async def update(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Merge ``values`` into the document; returns the new document."""
        async with self.storage.lock(KIND, self.name):
            doc = await self._load()
            doc.update(values)
            await self._store(doc)
            return doc

    async def replace(self, doc: Mapping[str, Any]) -> None:
        if not isinstance(doc, Mapping):
            raise ValidationError("state must be a JSON object (a dict)")
        async with self.storage.lock(KIND, self.name):
            await self._store(dict(doc))

    async def delete(self, key: str) -> bool:
        async with self.storage.lock(KIND, self.name):
            doc = await self._load()
            if key not in doc:
                return False
            del doc[key]
            await self._store(doc)
            return True
