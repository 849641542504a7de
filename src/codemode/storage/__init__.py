"""Where skills, artifacts and state live: ``FileStorage`` (default) or ``RedisStorage``.

``RedisStorage`` is imported lazily so file-only users never load the Redis client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import BadRecord, Listing, RecordInfo, Storage
from .file import FileStorage

if TYPE_CHECKING:
    from .redis import RedisStorage

__all__ = [
    "BadRecord",
    "FileStorage",
    "Listing",
    "RecordInfo",
    "RedisStorage",
    "Storage",
    "open_storage",
]


def __getattr__(name: str) -> Any:
    if name == "RedisStorage":
        from .redis import RedisStorage

        return RedisStorage
    raise AttributeError(name)


def open_storage(target: str, *, prefix: str = "codemode") -> Storage:
    """``redis://...`` or ``rediss://...`` gives RedisStorage; anything else is a directory."""
    if target.startswith(("redis://", "rediss://", "unix://")):
        from .redis import RedisStorage

        return RedisStorage(target, prefix)
    return FileStorage(target)
