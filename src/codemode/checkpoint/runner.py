"""A session's side of its checkpoints: save and restore through the worker's own
``run()`` (the worker pickles; the host only stores opaque bytes), so every executor that
speaks the worker protocol gets them, and ``session.py`` only says when."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..errors import CheckpointError, StorageError
from .store import CHECKPOINT_METHODS, CheckpointInfo, Checkpoints, Exchange

if TYPE_CHECKING:
    from ..execution.base import Worker
    from ..hostapi import HostAPI
    from ..result import ExecutionResult

_MODULE = "codemode_worker.checkpoint"


class SessionCheckpoints:
    """One session's checkpoint calls; remembers which unsaved names it already reported."""

    def __init__(self, store: Checkpoints, host: HostAPI) -> None:
        self.store = store
        self._exchange = Exchange(store)
        self._skipped_shown: dict[str, str] = {}
        CHECKPOINT_METHODS.install(host, self._exchange)

    async def save(self, worker: Worker) -> CheckpointInfo:
        exchange = self._exchange
        exchange.saved = None
        code = (
            f"__import__({_MODULE!r}, fromlist=['_'])"
            f".save_to_host(globals(), {self.store.max_bytes})"
        )
        result = await worker.run(code, self.store.timeout)
        if result.state_lost:
            raise CheckpointError(f"the worker was lost while saving a checkpoint: {result.error}")
        if result.error is not None or exchange.saved is None:
            raise CheckpointError(f"the checkpoint was not saved: {result.error}")
        return exchange.saved

    async def load(self, worker: Worker) -> CheckpointInfo | None:
        """Restore the stored checkpoint into ``worker``; None when there is none."""
        exchange = self._exchange
        info = await self.store.info()
        if info is None:
            return None
        exchange.restored = None
        code = f"__import__({_MODULE!r}, fromlist=['_']).restore_from_host(globals())"
        result = await worker.run(code, self.store.timeout)
        if result.error is not None or exchange.restored is None:
            raise CheckpointError(
                f"the checkpoint {self.store.name} was not restored: {result.error}"
            )
        return info

    async def restore_fresh(self, worker: Worker) -> str | None:
        """Restore into a worker just started; what to tell the user (None: nothing)."""
        try:
            info = await self.load(worker)
        except (CheckpointError, StorageError) as exc:
            return f"its checkpoint could not be restored ({exc}); the interpreter starts empty"
        if info is None:
            return None
        return (
            f"{info.count} variables were restored from the checkpoint of the last "
            f"completed run{_skipped_text(info.skipped)}"
        )

    async def after_run(self, worker: Worker, result: ExecutionResult) -> str | None:
        """The automatic checkpoint after a run; a warning for the run's result, if any."""
        if result.state_lost or not self.store.auto:
            return None
        try:
            info = await self.save(worker)
        except (CheckpointError, StorageError) as exc:
            return f"the variables were not checkpointed: {exc}"
        shown, self._skipped_shown = self._skipped_shown, dict(info.skipped)
        if info.skipped and info.skipped != shown:
            return f"not in the checkpoint (a crash would lose them): {_reasons(info.skipped)}"
        return None


def _reasons(skipped: Mapping[str, str], limit: int = 10) -> str:
    shown = [f"{name} ({why})" for name, why in list(skipped.items())[:limit]]
    more = len(skipped) - limit
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def _skipped_text(skipped: Mapping[str, str]) -> str:
    return f"; not saved, so not restored: {', '.join(skipped)}" if skipped else ""


__all__ = ["SessionCheckpoints"]
