"""Where a session's checkpoints live, and the worker -> host methods that move them.

The host treats a checkpoint as opaque bytes: it checks their size, stores them as one
record (kind ``checkpoints``) of the session's storage and hands them back; it never
unpickles them (``codemode_worker.checkpoint`` does, inside the worker). The record's name
is derived by the host from the session's tenant and key, never from the worker's words,
so a session's code can only read and write its own checkpoint.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ..context import EPHEMERAL_CLIENT
from ..errors import CheckpointError, NotFound
from ..rpc import Method, Params, Table
from ..storage.base import check_name

if TYPE_CHECKING:
    from ..context import CallContext
    from ..storage.base import Storage

KIND = "checkpoints"
DEFAULT_MAX_BYTES = 256 << 20


@dataclass(frozen=True)
class CheckpointInfo:
    """One stored checkpoint: what it holds and what could not be saved (name -> why).

    Read back from storage, ``names`` and ``skipped`` may be cut to fit the record's
    metadata (64 KB); ``count`` and ``skipped_count`` are always whole."""

    name: str
    size: int
    names: tuple[str, ...]
    skipped: dict[str, str] = field(default_factory=dict)
    created: float = 0.0
    python: str = ""
    count: int = 0
    skipped_count: int = 0

    @classmethod
    def from_meta(cls, name: str, size: int, meta: dict[str, Any]) -> CheckpointInfo:
        names = tuple(str(n) for n in meta.get("names", ()))
        skipped = {str(k): str(v) for k, v in dict(meta.get("skipped", {})).items()}
        return cls(
            name=name,
            size=size,
            names=names,
            skipped=skipped,
            created=float(meta.get("created", 0.0)),
            python=str(meta.get("python", "")),
            count=int(meta.get("count", len(names))),
            skipped_count=int(meta.get("skipped_count", len(skipped))),
        )


def _fit_meta(names: list[str], skipped: dict[str, str]) -> dict[str, Any]:
    """The names and reasons that fit the record's metadata, with their whole counts
    (names come from the worker: any number, any length)."""
    shown: list[str] = []
    room = 24_000
    for n in names:
        room -= len(n.encode()) + 4
        if room < 0:
            break
        shown.append(n)
    why: dict[str, str] = {}
    room = 24_000
    for k, v in skipped.items():
        v = v[:200]
        room -= len(k.encode()) + len(v.encode()) + 8
        if room < 0:
            break
        why[k] = v
    return {"names": shown, "count": len(names), "skipped": why, "skipped_count": len(skipped)}


class Checkpoints:
    """One session's checkpoint slot on a storage: its record name, size limit, timeout.

    ``Session(checkpoints=Checkpoints(storage, "agent-42"))`` saves the namespace after
    every run and, when a checkpoint of that name exists, starts its first worker with it
    (a session resumed hours later, in another process, on another node).
    """

    def __init__(
        self,
        storage: Storage,
        key: str,
        *,
        tenant: str = "default",
        auto: bool = True,
        max_bytes: int = DEFAULT_MAX_BYTES,
        timeout: float = 300.0,
        keep_seconds: float | None = 7 * 86400.0,
    ) -> None:
        if max_bytes <= 0:
            raise CheckpointError("max_bytes must be positive")
        self.storage = storage
        digest = hashlib.sha256(f"{tenant}\0{key}".encode()).hexdigest()[:40]
        self.prefix = f"{_safe(tenant)}@"
        self.name = check_name(f"{self.prefix}{digest}", "checkpoint name")
        """The record's name: the tenant, then a hash of tenant and key."""
        self.auto = auto
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.keep_seconds = keep_seconds
        """Checkpoints of this tenant not written for this long are deleted (None: kept)."""
        self._swept = False

    @classmethod
    def for_context(cls, storage: Storage, context: CallContext, **kwargs: Any) -> Checkpoints:
        """The slot of a session: keyed by its client (a stable key: the server's session
        key) or, for an ephemeral one, by its session id."""
        client = context.client or ""
        key = client if client and not client.startswith(EPHEMERAL_CLIENT) else None
        return cls(storage, key or str(context.session_id), tenant=context.tenant, **kwargs)

    async def info(self) -> CheckpointInfo | None:
        """The stored checkpoint's description, or None when there is none."""
        try:
            rec = await self.storage.info(KIND, self.name)
        except NotFound:
            return None
        return CheckpointInfo.from_meta(self.name, rec.size, rec.meta)

    async def write(
        self, data: bytes, names: list[str], skipped: dict[str, str], python: str
    ) -> CheckpointInfo:
        if len(data) > self.max_bytes:
            raise CheckpointError(
                f"the checkpoint is {len(data):,} bytes, over the limit of "
                f"{self.max_bytes:,} (checkpoint.max_mb)"
            )
        meta = {**_fit_meta(names, skipped), "python": python[:20], "created": time.time()}
        rec = await self.storage.put(KIND, self.name, data, meta)
        if not self._swept:
            self._swept = True
            await self.sweep()
        return CheckpointInfo(
            self.name,
            rec.size,
            tuple(names),
            dict(skipped),
            meta["created"],
            python,
            len(names),
            len(skipped),
        )

    async def sweep(self) -> int:
        """Delete this tenant's checkpoints older than ``keep_seconds`` (sessions that
        never came back); done at a slot's first write. Returns how many."""
        if self.keep_seconds is None:
            return 0
        horizon = time.time() - self.keep_seconds
        gone = 0
        for rec in await self.storage.list(KIND, self.prefix):
            created = rec.meta.get("created")
            if isinstance(created, int | float) and created < horizon and rec.name != self.name:
                gone += await self.storage.delete(KIND, rec.name)
        return gone

    async def read(self) -> bytes:
        _, data = await self.storage.read(KIND, self.name)
        return data

    async def delete(self) -> bool:
        return await self.storage.delete(KIND, self.name)


def _safe(tenant: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in tenant)[:100]
    return cleaned if cleaned and cleaned[0].isalnum() else f"t{cleaned}"


class Exchange:
    """The host end of one session's checkpoint calls; remembers what the last one did."""

    def __init__(self, store: Checkpoints) -> None:
        self.store = store
        self.saved: CheckpointInfo | None = None
        self.restored: tuple[str, ...] | None = None


class SaveParams(Params):
    data: bytes = Field(description="The pickled namespace (opaque to the host).")
    names: list[str] = Field(max_length=1_000_000, description="The names it holds.")
    skipped: dict[str, str] = Field(description="Names that could not be saved, and why.")
    python: str = Field(max_length=20, description="The Python version that wrote it.")


class NoParams(Params):
    pass


class RestoredParams(Params):
    names: list[str] = Field(max_length=1_000_000, description="The names restored.")


async def _save(x: Exchange, p: SaveParams) -> dict[str, int]:
    x.saved = await x.store.write(p.data, p.names, p.skipped, p.python)
    return {"size": x.saved.size}


async def _load(x: Exchange, p: NoParams) -> bytes:
    return await x.store.read()


async def _restored(x: Exchange, p: RestoredParams) -> None:
    x.restored = tuple(p.names)


CHECKPOINT_METHODS: Table[Exchange] = Table(
    Method(
        "checkpoint.save",
        SaveParams,
        _save,
        result='{"size": int}',
        description="Store the session's pickled namespace (its checkpoint).",
        error=CheckpointError,
    ),
    Method(
        "checkpoint.load",
        NoParams,
        _load,
        result="bytes",
        description="The session's checkpoint, for a fresh worker to restore.",
        error=CheckpointError,
    ),
    Method(
        "checkpoint.restored",
        RestoredParams,
        _restored,
        result="null",
        description="The names a restore brought back.",
        error=CheckpointError,
    ),
)

__all__ = ["CHECKPOINT_METHODS", "CheckpointInfo", "Checkpoints", "Exchange"]
