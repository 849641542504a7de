"""codemode as an MCP server (``codemode serve``).

``app`` builds the ``MCPServer`` from a ``Toolset`` (``toolset``), ``sessions`` gives each
client its own codemode session, ``http`` adds auth and health checks for streamable
HTTP, ``cli`` is the ``serve`` command. This package and ``tools/sources/mcp.py`` are the
only places that import the MCP SDK.
"""

from .custom import CodemodeServer, create_server
from .sessions import SessionLimitReached, SessionManager
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
