"""codemode as an MCP server (``codemode serve``).

``app`` builds the ``MCPServer`` from a ``Toolset`` (``toolset``), ``sessions`` gives each
client its own codemode session (admission queue, expiry, reclaim), ``calls`` tracks
running calls so they can be cancelled, ``lifecycle`` is the graceful stop, ``http`` and
``stdio`` are the transports (auth, health, client tracking), ``cli`` is the ``serve``
command. This package and ``tools/sources/mcp/`` are the
only places that import the MCP SDK.
"""

from .custom import CodemodeServer, create_server
from .session_records import SessionLimitReached
from .sessions import SessionManager
from .toolset import Call, Reply, ServerContext, Toolset

__all__ = [
    "Call",
    "CodemodeServer",
    "Reply",
    "ServerContext",
    "SessionLimitReached",
    "SessionManager",
    "Toolset",
    "create_server",
]
