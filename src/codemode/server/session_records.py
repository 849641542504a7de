"""The records of ``sessions.py``: its errors, a session's entry, a queued caller, a
client's link count and the lease a call borrows. Apart so the manager's module holds
only its logic."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import anyio

from codemode.errors import CodemodeError

if TYPE_CHECKING:
    from codemode.session import Session


class SessionLimitReached(CodemodeError):
    """Every session slot is taken; the caller should retry later or close a client.

    Local subclass of the base error: it is a server policy, raised only here.
    """


class ServerBusy(SessionLimitReached):
    """No session slot freed up in time (or the queue is full): retry after ``retry_after`` s."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ShuttingDown(CodemodeError):
    """The server is stopping and takes no new calls."""


class ServerSession(Protocol):
    """What the manager needs from a codemode session (``codemode.session.Session``)."""

    async def close(self) -> None: ...


SessionFactory = Callable[[str | None], Awaitable["Session"]]
"""Returns a started session for a key. Called once per new key (and with ``None`` per
ephemeral call)."""


@dataclass(eq=False)
class Entry:
    key: str
    created: float
    last_used: float
    session: Session | None = None
    error: BaseException | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)
    lock: anyio.Lock = field(default_factory=lambda: anyio.Lock(fast_acquire=True))
    """Taken by every call; free, it is taken without yielding to the loop (anyio's
    default yields a turn, which costs every call tens of ms on a saturated loop)."""
    busy: int = 0
    client: str = ""
    """Who started it: the slot is counted against that client's share."""


def what_remains(entry: Entry) -> str:
    """What a closed session leaves to the next one: nothing, or its checkpoint."""
    if entry.session is not None and getattr(entry.session, "checkpoints", None) is not None:
        return (
            "its variables were checkpointed and come back in the new one (the run's "
            "result names any that could not be saved)."
        )
    return "its variables and imports are gone."


@dataclass(eq=False, slots=True)
class Waiter:
    """A caller queued for a session slot."""

    client: str
    event: anyio.Event = field(default_factory=anyio.Event)
    granted: bool = False
    refusal: CodemodeError | None = None


@dataclass(slots=True)
class Link:
    """How many streams or requests of a client are open, and since when none is."""

    open: int = 0
    since: float = 0.0


@dataclass(frozen=True, slots=True)
class Lease:
    """A session borrowed for one call."""

    session: Session
    key: str | None
    new: bool
    """True when this call started the session."""
    notice: str | None = None
    """Something the model should be told (e.g. its previous session expired)."""

    @property
    def ephemeral(self) -> bool:
        return self.key is None
