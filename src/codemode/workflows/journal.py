"""The journal of workflow runs: every step recorded as started, then finished.

A run is a sequence of events (JSON objects)::

    {"ev": "run", "run_id", "workflow": {...the file's content...}, "source", "inputs", "t"}
    {"ev": "start", "step": "loop[2]/fetch", "attempt": 1, "t"}
    {"ev": "done", "step": ..., "output": ..., "t"}
    {"ev": "fail", "step": ..., "error": "...", "uncertain": false, "t"}
    {"ev": "status", "status": "succeeded|failed|stopped|waiting|needs_decision", ...}

Events are only appended. Resuming reads them back: a step with a ``done`` event is never
run again (its output is taken from the journal), a ``start`` without ``done`` is a step
that may or may not have had its effect.

Two stores behind one small protocol: ``FileJournals`` (the default with file storage):
one JSON-lines file per run, each event one ``write`` to a file opened in append mode, so
a SIGKILL loses at most the event being written (a torn last line is ignored on read);
``fsync=True`` also survives a machine crash, at a cost per event. ``StorageJournals``
works on any ``Storage`` (Redis, plugins): one record per event, atomic by the storage's
own guarantee.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from ..errors import NotFound, ValidationError
from ..storage.base import Storage, check_name
from .errors import WorkflowError

Event = dict[str, Any]


class Journals(Protocol):
    """Where runs' events are kept."""

    async def append(self, run_id: str, event: Mapping[str, Any]) -> None: ...

    async def read(self, run_id: str) -> list[Event]:
        """Every event of the run, in order (``NotFound`` for an unknown run)."""
        ...

    async def runs(self) -> list[str]:
        """Run ids, oldest first."""
        ...


def stamp(event: Mapping[str, Any]) -> Event:
    return {**event, "t": round(time.time(), 3)}


def encode(event: Mapping[str, Any], **options: Any) -> bytes:
    """``event`` stamped, as UTF-8 JSON. A string with a lone surrogate (a tool's JSON
    result can hold ``"\\udc80"``) has no UTF-8 form: such an event is written with
    JSON's ``\\u`` escapes, which read back as the same string. Before, the encoding
    error escaped the engine and left the run "running" for ever."""
    stamped = stamp(event)
    try:
        return json.dumps(stamped, ensure_ascii=False, default=str, **options).encode()
    except UnicodeEncodeError:
        return json.dumps(stamped, ensure_ascii=True, default=str, **options).encode()


class FileJournals:
    """One append-only JSON-lines file per run, in ``folder``."""

    def __init__(self, folder: Path, *, fsync: bool = False, max_bytes: int | None = None) -> None:
        """``max_bytes``: most one run's file may hold (its final status line excepted):
        the files sit outside the memory quota, and a loop journaling a large output per
        iteration would otherwise fill the disk."""
        self.folder = folder
        self.fsync = fsync
        self.max_bytes = max_bytes
        self._files: dict[str, Any] = {}
        self._sizes: dict[str, int] = {}

    def _path(self, run_id: str) -> Path:
        return self.folder / f"{check_name(run_id, 'run id')}.jsonl"

    async def append(self, run_id: str, event: Mapping[str, Any]) -> None:
        fh = self._files.get(run_id)
        if fh is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            _drop_torn_tail(self._path(run_id))
            fh = self._files[run_id] = open(self._path(run_id), "ab", buffering=0)  # noqa: SIM115
            self._sizes[run_id] = os.fstat(fh.fileno()).st_size
        line = encode(event, separators=(",", ":")) + b"\n"
        size = self._sizes[run_id] + len(line)
        if self.max_bytes is not None and size > self.max_bytes and event.get("ev") != "status":
            raise WorkflowError(
                f"run {run_id}'s journal would hold more than {self.max_bytes / (1 << 20):g} MB "
                f"(this event: {len(line):,} bytes): keep large outputs in artifacts, or raise "
                "workflows.max_journal_mb in the workspace's config"
            )
        fh.write(line)  # one write(2): whole lines or a torn last one
        self._sizes[run_id] = size
        if self.fsync:
            os.fsync(fh.fileno())

    async def read(self, run_id: str) -> list[Event]:
        try:
            raw = self._path(run_id).read_bytes()
        except FileNotFoundError:
            raise NotFound(f"no workflow run {run_id!r}") from None
        events = []
        lines = raw.split(b"\n")
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                events.append(json.loads(line))
            except ValueError:
                if i < len(lines) - 2:  # only the last line may be torn by a crash
                    raise ValidationError(
                        f"{self._path(run_id)}:{i + 1}: the journal is damaged"
                    ) from None
        return events

    async def runs(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        files = sorted(self.folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
        return [p.stem for p in files]

    def close(self, run_id: str) -> None:
        self._sizes.pop(run_id, None)
        fh = self._files.pop(run_id, None)
        if fh is not None:
            fh.close()


def _drop_torn_tail(path: Path) -> None:
    """A crash may have left half an event at the end: cut it before appending, or the
    next event would be glued to it (an event is only ever whole or absent)."""
    try:
        with open(path, "rb+") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size == 0:
                return
            fh.seek(max(0, size - 65536))
            tail = fh.read()
            if tail.endswith(b"\n"):
                return
            cut = tail.rfind(b"\n")
            if cut < 0 and size > len(tail):
                return  # one huge torn event: left as is (read() ignores a torn last line)
            fh.truncate(size - len(tail) + cut + 1)
    except FileNotFoundError:
        return


class StorageJournals:
    """Events as records of a ``Storage`` (kind ``workflow_events``), one per event."""

    KIND = "workflow_events"

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._seq: dict[str, int] = {}

    async def append(self, run_id: str, event: Mapping[str, Any]) -> None:
        check_name(run_id, "run id")
        seq = self._seq.get(run_id)
        if seq is None:
            seq = len((await self.storage.list(self.KIND, f"{run_id}.")).records)
        raw = encode(event)
        await self.storage.put(self.KIND, f"{run_id}.{seq:08d}", raw, {"run": run_id})
        self._seq[run_id] = seq + 1

    async def read(self, run_id: str) -> list[Event]:
        listing = await self.storage.list(self.KIND, f"{check_name(run_id, 'run id')}.")
        if not listing.records:
            raise NotFound(f"no workflow run {run_id!r}")
        out = []
        for info in listing.records:
            _, raw = await self.storage.read(self.KIND, info.name)
            out.append(json.loads(raw))
        return out

    async def runs(self) -> list[str]:
        listing = await self.storage.list(self.KIND)
        firsts = [r.name[:-9] for r in listing.records if r.name.endswith(".00000000")]
        return firsts


__all__ = ["Event", "FileJournals", "Journals", "StorageJournals", "encode", "stamp"]
