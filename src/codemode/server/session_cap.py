"""Session slots shared by the session managers of one process (``serve --tenants``).

Each tenant's ``SessionManager`` caps its own sessions (``--max-sessions``); without a
shared cap a process serving T tenants could hold T times that many sandbox workers, each
allowed its memory limit. ``SessionCap`` is the process-wide bound: a manager takes a slot
from it with each of its own, and a freed slot goes to the managers' waiting clients in
turn (round robin over the tenants), so one busy tenant cannot keep the others out.
A tenant holding ``share`` of the slots or more while another tenant waits gets no new
one (``--client-share``: a tenant is the client its token names), and freed slots go to
tenants under their share first.
Like the managers, it lives on one event loop and needs no lock.
"""

from __future__ import annotations

import math
import os
from typing import Protocol

DEFAULT_WORKER_MB = 1024
"""A sandbox worker's default memory limit (``execution.limits.Limits.memory_mb``)."""


class Member(Protocol):
    def grant_waiter(self) -> bool:
        """Give one free slot to the next waiting client, if any may have it."""
        ...

    @property
    def held(self) -> int:
        """Slots it holds."""
        ...

    @property
    def queued(self) -> int:
        """Its clients waiting for a slot."""
        ...


class SessionCap:
    """At most ``limit`` session slots held at once by all the managers that joined."""

    def __init__(self, limit: int, share: float = 1.0) -> None:
        if limit < 1:
            raise ValueError("the process-wide session limit must be at least 1")
        if not 0 < share <= 1:
            raise ValueError("share must be above 0 and at most 1")
        self.limit = limit
        self.share = share
        self.most = max(1, math.floor(share * limit))
        """Slots a member may hold while another member waits for one."""
        self.used = 0
        self._members: list[Member] = []
        self._next = 0

    @property
    def full(self) -> bool:
        return self.used >= self.limit

    def join(self, member: Member) -> None:
        self._members.append(member)

    def leave(self, member: Member, held: int) -> None:
        """A manager closed with ``held`` slots: they are free for the others."""
        if member in self._members:
            self._members.remove(member)
            self.release(held)

    def release(self, n: int = 1) -> None:
        self.used -= n
        self.dispatch()

    @property
    def queued(self) -> int:
        """Clients of every member waiting for a slot."""
        return sum(m.queued for m in self._members)

    def over_share(self, member: Member) -> bool:
        return self.share < 1 and member.held >= self.most

    def others_waiting(self, member: Member) -> bool:
        return any(m is not member and m.queued for m in self._members)

    def dispatch(self) -> None:
        """Hand free slots to the members' waiters, one member after the other: those
        under their share first."""
        for fair in (True, False):
            idle = 0
            while not self.full and self._members and idle < len(self._members):
                member = self._members[self._next % len(self._members)]
                self._next += 1
                may = not (fair and self.over_share(member))
                idle = 0 if may and member.grant_waiter() else idle + 1


def default_total(max_sessions: int, worker_mb: int = DEFAULT_WORKER_MB) -> int:
    """The process-wide default: as many workers as the machine's memory holds at their
    limit, and never fewer than one tenant's ``max_sessions``."""
    try:
        ram_mb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (1 << 20)
    except (ValueError, OSError):
        return max_sessions
    return max(max_sessions, ram_mb // max(worker_mb, 1))


__all__ = ["SessionCap", "default_total"]
