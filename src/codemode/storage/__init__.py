"""Where skills, artifacts and state live: ``FileStorage`` (default) or ``RedisStorage``.

``RedisStorage`` imports without the Redis client (the ``redis`` extra); constructing one
without it raises a ``ConfigError`` that names the extra to install.
"""

from __future__ import annotations

from .base import BadRecord, Listing, RecordInfo, Storage
from .file import FileStorage
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


def open_storage(target: str, *, prefix: str = "codemode") -> Storage:
    """``redis://...`` or ``rediss://...`` gives RedisStorage; anything else is a directory."""
    if target.startswith(("redis://", "rediss://", "unix://")):
        return RedisStorage(target, prefix)
    return FileStorage(target)
