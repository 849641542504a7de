"""The ``Storage`` seam: named records grouped by kind, on files or on Redis.

A record is a small JSON metadata document plus opaque bytes. Metadata can be listed
without reading the bytes; the bytes can be streamed in chunks both ways. Skills,
artifacts and state are built on these records and know nothing of the backend.

Guarantees every backend keeps (checked by ``tests/storage``):

- a record is replaced all at once: readers see the old version or the new one, never a mix
  or a half-written value, even when the writer dies or the connection drops;
- a listing reports unreadable records in ``Listing.bad`` and still returns the good ones;
- ``generation(kind)`` changes whenever a record of that kind changes (cheap cache key);
- ``lock(kind, name)`` serialises read-modify-write sequences across processes and hosts.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..errors import ValidationError

CHUNK = 1 << 20
MAX_META = 1 << 16

_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}\Z")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@=+-]{0,199}\Z")

Data = bytes | bytearray | memoryview | Iterable[bytes] | AsyncIterable[bytes]


@dataclass(frozen=True)
class RecordInfo:
    """What a listing says about one record, without its bytes."""

    kind: str
    name: str
    size: int
    meta: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size, **self.meta}


@dataclass(frozen=True)
class BadRecord:
    """A record a listing could not read; ``where`` is the file or key."""

    name: str
    where: str
    message: str


@dataclass
class Listing:
    """Readable records (sorted by name) and the unreadable ones, reported apart."""

    records: list[RecordInfo] = field(default_factory=list)
    bad: list[BadRecord] = field(default_factory=list)

    def __iter__(self) -> Iterator[RecordInfo]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def names(self) -> list[str]:
        return [r.name for r in self.records]


@runtime_checkable
class Storage(Protocol):
    """Records grouped by kind. Every method may raise ``StorageUnavailable``."""

    def describe(self) -> str:
        """Where the records live, for messages and ``codemode doctor``."""
        ...

    async def put(
        self, kind: str, name: str, data: Data, meta: Mapping[str, Any] | None = None
    ) -> RecordInfo:
        """Store (or replace) a record atomically; chunks are written as they come."""
        ...

    async def info(self, kind: str, name: str) -> RecordInfo:
        """Metadata of one record (``NotFound``, ``CorruptRecord``)."""
        ...

    async def read(self, kind: str, name: str) -> tuple[RecordInfo, bytes]:
        """Metadata and the whole value."""
        ...

    async def stream(
        self, kind: str, name: str, chunk_size: int = CHUNK
    ) -> tuple[RecordInfo, AsyncIterator[bytes]]:
        """Metadata and an iterator over the value's chunks, for values too big to copy."""
        ...

    async def exists(self, kind: str, name: str) -> bool: ...

    async def delete(self, kind: str, name: str) -> bool:
        """Remove a record; False when there was none."""
        ...

    async def list(self, kind: str, prefix: str = "") -> Listing: ...

    async def generation(self, kind: str) -> str:
        """A token that changes whenever a record of ``kind`` is written or deleted."""
        ...

    def lock(
        self, kind: str, name: str, timeout: float = 30.0
    ) -> AbstractAsyncContextManager[None]:
        """Exclusive lock for a read-modify-write of one record, across processes."""
        ...

    async def aclose(self) -> None: ...


def check_kind(kind: str) -> str:
    if not isinstance(kind, str) or not _KIND.match(kind):
        raise ValidationError(f"invalid record kind {kind!r}")
    return kind


def check_name(name: str, what: str = "name") -> str:
    """Names become file names and Redis keys: letters, digits and ``_ . @ = + -``."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise ValidationError(
            f"invalid {what} {name!r}: use 1-200 letters, digits, '_', '-', '.', '@', '=' "
            "or '+', not starting with '.' or '-'"
        )
    return name


def name_problem(name: str) -> str | None:
    """Why a name found in storage (a file, a Redis field) cannot name a record, or None.

    Names come from outside codemode too (a file copied into ``artifacts/``, a field
    written by another tool): a listing reports such an entry instead of failing.
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "its name is not valid UTF-8"
    if not _NAME.match(name) or ".." in name:
        return (
            f"{name!r} is not a valid record name (1-200 letters, digits, '_', '-', '.', "
            "'@', '=' or '+', not starting with '.' or '-')"
        )
    return None


def shown(raw: str | bytes) -> str:
    """A name or path as text that can always be printed and sent as JSON: bytes that are
    not UTF-8 appear as ``\\xNN``."""
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogateescape")
    return data.decode("utf-8", "backslashreplace")


def shell_word(raw: str | bytes) -> str:
    """``raw`` quoted for a POSIX shell, with ``$'\\xNN'`` for bytes that are not UTF-8."""
    import shlex

    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogateescape")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        out = []
        for byte in data:
            ch = chr(byte)
            if byte < 0x80 and ch.isprintable() and ch not in "'\\":
                out.append(ch)
            else:
                out.append(f"\\x{byte:02x}")
        return "$'" + "".join(out) + "'"
    return shlex.quote(text)


def to_bytes(data: bytes | bytearray | memoryview) -> bytes | memoryview:
    return data if isinstance(data, bytes) else memoryview(data).cast("B")


async def iter_chunks(data: Data, chunk_size: int = CHUNK) -> AsyncIterator[bytes | memoryview]:
    """Yield ``data`` as chunks without copying buffers (memoryview slices)."""
    if isinstance(data, bytes | bytearray | memoryview):
        view = memoryview(data).cast("B")
        if len(view) == 0:
            return
        for i in range(0, len(view), chunk_size):
            yield view[i : i + chunk_size]
    elif isinstance(data, AsyncIterable):
        async for chunk in data:
            if chunk:
                yield chunk
    else:
        for chunk in data:
            if chunk:
                yield chunk


def encode_meta(meta: Mapping[str, Any] | None) -> bytes:
    import json

    try:
        raw = json.dumps(dict(meta or {}), separators=(",", ":"), ensure_ascii=False).encode()
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"record metadata must be JSON: {exc}") from None
    if len(raw) > MAX_META:
        raise ValidationError(f"record metadata is {len(raw)} bytes; the limit is {MAX_META}")
    return raw
