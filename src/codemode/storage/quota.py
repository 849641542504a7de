"""``QuotaStorage``: a ``Storage`` that keeps one workspace's records within a quota.

Wraps any backend (files or Redis). Before a record is written, the bytes and records
already stored (every kind, from listings cached by ``generation``) plus the writes in
flight are compared with the limits (a record's bytes are its value and its metadata);
a write that would go over is refused with :class:`~codemode.errors.QuotaExceeded`
before anything is written. A value that arrives as a stream is counted as it comes and
aborted when it crosses the limit: the backend then drops its temporary copy, so nothing
is ever half-written.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from ..errors import QuotaExceeded
from .base import Data, RecordInfo, Storage, encode_meta, iter_chunks
from .forwarding import ForwardingStorage

# The kinds codemode's memory writes; any other kind written through the wrapper joins.
MEMORY_KINDS = ("artifacts", "state", "skills", "skill_versions")


def _meta_size(meta: Mapping[str, Any] | None) -> int:
    """Bytes of a record's metadata as stored: counted with its value, or records with
    small values and 64 KB of metadata (a skill's tags) filled the disk past the quota."""
    return len(encode_meta(meta)) if meta else 0


def _mb(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB"


class QuotaStorage(ForwardingStorage):
    """``inner`` with at most ``max_bytes`` of values and ``max_records`` records."""

    def __init__(self, inner: Storage, *, max_bytes: int | None, max_records: int | None) -> None:
        super().__init__(inner)
        self.max_bytes = max_bytes
        self.max_records = max_records
        self._kinds: set[str] = set(MEMORY_KINDS)
        self._listings: dict[str, tuple[str, dict[str, int]]] = {}
        self._in_flight = 0

    def __getattr__(self, name: str) -> Any:  # backend-specific extras (e.g. ``base``)
        return getattr(self.inner, name)

    async def usage(self) -> tuple[int, int]:
        """(bytes, records) stored now."""
        sizes = await self._sizes()
        return sum(sum(s.values()) for s in sizes.values()), sum(len(s) for s in sizes.values())

    async def _sizes(self) -> dict[str, dict[str, int]]:
        out = {}
        for kind in sorted(self._kinds):
            gen = await self.inner.generation(kind)
            cached = self._listings.get(kind)
            if cached is None or cached[0] != gen:
                listing = await self.inner.list(kind)
                cached = (gen, {r.name: r.size + _meta_size(r.meta) for r in listing.records})
                self._listings[kind] = cached
            out[kind] = cached[1]
        return out

    def _refuse(self, kind: str, name: str, why: str) -> QuotaExceeded:
        return QuotaExceeded(
            f"cannot save {kind} {name!r}: {why}. Nothing was written; delete artifacts, "
            "skills or state you no longer need (or ask the operator to raise the quota)"
        )

    async def put(
        self, kind: str, name: str, data: Data, meta: Mapping[str, Any] | None = None
    ) -> RecordInfo:
        self._kinds.add(kind)
        sizes = await self._sizes()
        used = sum(sum(s.values()) for s in sizes.values()) + self._in_flight
        old = sizes.get(kind, {}).get(name)
        count = sum(len(s) for s in sizes.values())
        if old is None and self.max_records is not None and count + 1 > self.max_records:
            raise self._refuse(
                kind, name, f"the workspace already holds {count:,} records (limit "
                f"{self.max_records:,})"
            )  # fmt: skip
        extra = _meta_size(meta)  # metadata is stored too: up to 64 KB a record
        room = None if self.max_bytes is None else self.max_bytes - (used - (old or 0)) - extra
        if isinstance(data, bytes | bytearray | memoryview):
            size = memoryview(data).nbytes
            if room is not None and size > room:
                raise self._refuse(
                    kind, name, f"{_mb(size + extra)} would take the workspace's memory to "
                    f"{_mb(used - (old or 0) + size + extra)} (limit {_mb(self.max_bytes or 0)})"
                )  # fmt: skip
            self._in_flight += size + extra
            try:
                return await self.inner.put(kind, name, data, meta)
            finally:
                self._in_flight -= size + extra
        if room is None:
            return await self.inner.put(kind, name, data, meta)
        return await self._counted_put(kind, name, data, meta, room)

    async def _counted_put(
        self, kind: str, name: str, data: Data, meta: Mapping[str, Any] | None, room: int
    ) -> RecordInfo:
        """A streamed value: counted chunk by chunk, aborted at the limit."""
        taken = 0

        async def counted() -> AsyncIterator[bytes]:
            nonlocal taken
            async for chunk in iter_chunks(data):
                n = memoryview(chunk).nbytes
                if taken + n > room:
                    raise self._refuse(
                        kind, name, f"the value grew past the {_mb(room)} left under the "
                        f"limit of {_mb(self.max_bytes or 0)}"
                    )  # fmt: skip
                taken += n
                self._in_flight += n
                yield bytes(chunk) if isinstance(chunk, memoryview) else chunk

        try:
            return await self.inner.put(kind, name, counted(), meta)
        finally:
            self._in_flight -= taken


__all__ = ["MEMORY_KINDS", "QuotaStorage"]
