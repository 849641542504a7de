"""Format versions of the memory's stored records, and the path from older ones.

Every record written carries ``"format": N`` in its metadata (``stamp``). A record read
back goes through ``upgrade``: one migration per version step turns what an older release
wrote into what this one expects (metadata and value), so a workspace written by any
earlier release opens; the record is rewritten in the new format the next time it changes.
A record from a *newer* release is refused with a message that says so, never misread.

Format 0 is what codemode 0.1.0 wrote (no ``format`` key); format 1 has the same fields.
``tests/fixtures/workspace-0.1.0`` is a workspace 0.1.0 wrote: ``tests/test_formats.py``
opens it and reads everything back exactly. When a format changes: bump ``CURRENT``, add
the step to ``MIGRATIONS``, and add a fixture written by the release before the change.
(The storage layer has its own framing version: ``FileStorage``'s ``CMREC01`` header.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import CorruptRecord
from ..storage.base import RecordInfo

FORMAT_KEY = "format"

CURRENT: dict[str, int] = {"skills": 1, "skill_versions": 1, "artifacts": 1, "state": 1}
"""Record kind -> the format this release writes."""

Migration = Callable[[dict[str, Any], bytes], tuple[dict[str, Any], bytes]]


def _unchanged(meta: dict[str, Any], raw: bytes) -> tuple[dict[str, Any], bytes]:
    return meta, raw


MIGRATIONS: dict[tuple[str, int], Migration] = {
    # (kind, from version) -> the step to version + 1
    ("skills", 0): _unchanged,
    ("skill_versions", 0): _unchanged,
    ("artifacts", 0): _unchanged,
    ("state", 0): _unchanged,
}


def stamp(kind: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    """``meta`` with the format this release writes for ``kind``."""
    return {**meta, FORMAT_KEY: CURRENT[kind]}


def version_of(info: RecordInfo) -> int:
    value = info.meta.get(FORMAT_KEY, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CorruptRecord(f"{info.kind}/{info.name}: format {value!r} is not a version number")
    return value


def newer(info: RecordInfo) -> str | None:
    """Why this release cannot read ``info`` (written by a newer one), or None."""
    version, current = version_of(info), CURRENT[info.kind]
    if version <= current:
        return None
    return (
        f"{info.kind}/{info.name} was written by a newer codemode (format {version}; "
        f"this one reads formats up to {current}): upgrade codemode to read it"
    )


def upgrade(info: RecordInfo, raw: bytes = b"") -> tuple[RecordInfo, bytes]:
    """The record as this release's format (metadata and value), migrating step by step."""
    problem = newer(info)
    if problem is not None:
        raise CorruptRecord(problem)
    version, meta = version_of(info), dict(info.meta)
    while version < CURRENT[info.kind]:
        meta, raw = MIGRATIONS[(info.kind, version)](meta, raw)
        version += 1
    meta[FORMAT_KEY] = version
    return RecordInfo(info.kind, info.name, info.size, meta), raw


def readable(records: Iterable[RecordInfo]) -> tuple[list[RecordInfo], list[tuple[str, str]]]:
    """Records this release reads (upgraded), and (name, why) for those it cannot."""
    good: list[RecordInfo] = []
    bad: list[tuple[str, str]] = []
    for info in records:
        try:
            good.append(upgrade(info)[0])
        except CorruptRecord as exc:
            bad.append((info.name, str(exc)))
    return good, bad


__all__ = ["CURRENT", "FORMAT_KEY", "MIGRATIONS", "newer", "readable", "stamp", "upgrade"]
