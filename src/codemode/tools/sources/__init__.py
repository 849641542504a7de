"""Tool sources: where tools come from (Python callables here; MCP servers in ``mcp.py``).

The MCP source is not imported here: importing the SDK costs ~1 s and the core must not
depend on it.
"""

from codemode.tools.sources.python import PythonSource

__all__ = ["PythonSource"]
