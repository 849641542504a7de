"""Whose call is this: the identity every tool call and every run carries.

A ``Session`` owns a base ``CallContext`` (its session id, plus the tenant and client that
whoever created it gave) and derives one per run (``run_id``). While the worker's calls of
a run are served, ``current_context`` holds that run's context, so a tool call made from
the agent's code carries it into the tool-call chain (``ToolCall.context``). A direct SDK
call (``registry.call(...)``) gets the context it is given, or the one current in its task.
"""

from __future__ import annotations

import secrets
import uuid
from contextvars import ContextVar
from dataclasses import dataclass, replace

DEFAULT_TENANT = "default"


@dataclass(frozen=True, slots=True)
class CallContext:
    """Who a call or run is for; layers (audit, policy, budgets...) key on it."""

    tenant: str = DEFAULT_TENANT
    workspace: str | None = None
    """The workspace directory (or name) the session was opened on."""
    session_id: str | None = None
    run_id: str | None = None
    client: str | None = None
    """Who drives the session: an MCP client's session key, an agent's name..."""
    after_run: str | None = None
    """For a call the session's code makes between runs (from a thread a run left
    running): the run that ended last. It has no ``run_id`` (it is in no run's trace), but
    spends that run's budgets: a thread left behind must not be a way around them. Before
    the session's first run (what a restored checkpoint starts): ``session_start(...)``,
    the stand-in run of the session's start, with budgets of its own."""

    def for_session(self) -> CallContext:
        """This context with a session id (a fresh one unless it has one)."""
        return self if self.session_id else replace(self, session_id=new_id())

    def for_run(self, run_id: str | None = None) -> CallContext:
        """This context for one run (a fresh run id unless given)."""
        return replace(self, run_id=run_id or new_id())


def session_start(session_id: str) -> str:
    """The ``after_run`` of calls made before a session's first run: a stand-in run, so
    per-run budgets bound them too (and the audit says when they were made)."""
    return f"{session_id}:start"


EPHEMERAL_CLIENT = "ephemeral-"
"""How the name of a caller without a session begins (:func:`ephemeral_client`)."""


def ephemeral_client() -> str:
    """A name for a caller without a session, its own: a session-scoped privacy vault, the
    audit and checkpoints are keyed by the client (one shared name once let a token given
    to one such caller be restored in another's tool call)."""
    return EPHEMERAL_CLIENT + secrets.token_hex(6)


def new_id() -> str:
    return uuid.uuid4().hex[:16]


current_context: ContextVar[CallContext] = ContextVar(
    "codemode_call_context",
    default=CallContext(),  # noqa: B039 - frozen: never mutated
)
"""The context of the call being served (set per worker call by ``Session``)."""


__all__ = ["DEFAULT_TENANT", "CallContext", "current_context", "new_id"]
