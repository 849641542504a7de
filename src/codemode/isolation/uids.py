"""The unprivileged uids codemode's host-side helpers run as, when codemode runs as root.

Each helper gets its own uid, distinct from the sandbox's (65534, ``nobody``): a process
of the agent's sandbox must never share a uid with a helper that handles its data, or it
could signal, trace or write into it. None of them needs an ``/etc/passwd`` entry.

``server_uid(tenant)`` gives every upstream MCP server the same uid today; once tenants
exist, each gets its own from the range below, so one tenant's servers cannot read the
files another tenant's servers wrote.
"""

from __future__ import annotations

import hashlib

from ..execution.bwrap import SANDBOX_UID

DEPS_UID = 65533
"""pip, downloading and unpacking the wheels ``deps.add`` asked for."""
SERVERS_UID = 65532
"""Upstream stdio MCP servers (the default tenant)."""
TENANT_UID_BASE = 200_000
TENANT_UID_SPAN = 100_000


def server_uid(tenant: str | None = None) -> int:
    """The uid (and gid) upstream servers of ``tenant`` run as."""
    if not tenant:
        return SERVERS_UID
    digest = int.from_bytes(hashlib.sha256(tenant.encode()).digest()[:8], "big")
    return TENANT_UID_BASE + digest % TENANT_UID_SPAN


__all__ = ["DEPS_UID", "SANDBOX_UID", "SERVERS_UID", "server_uid"]
