"""An upstream MCP server as a codemode tool source (the only core package importing ``mcp``).

- ``source``: :class:`MCPSource`, listing and calling tools over one shared connection;
- ``connection``: the live ``mcp.Client`` and the background task owning it;
- ``convert``: MCP's types into codemode's, in one place;
- ``lenient``: a result breaking its tool's ``outputSchema`` is kept, with a warning;
- ``stderr``: a failed server's stderr tail and exceptions, as one redacted sentence.

SDK errors are translated into ``codemode.errors`` at this boundary only::

    OSError on spawn, early exit, refused connection   -> ServerUnavailable (with stderr tail)
    connection closed mid-call                          -> ServerUnavailable
    per-call timeout (call cancelled upstream)          -> ToolTimeout
    JSON-RPC error answer, malformed result             -> ToolError
"""

from codemode.tools.sources.mcp.source import MCPSource

__all__ = ["MCPSource"]
