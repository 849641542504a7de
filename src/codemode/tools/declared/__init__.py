"""Tools defined outside MCP, in YAML or JSON files of the workspace's ``tools/`` folder:
command-line tools (sandboxed unless marked ``host``) and HTTP tools (fixed origin,
address-checked connections). See ``model`` for the format, docs/tools.md for a guide."""

from __future__ import annotations

from .model import ToolDef, ToolFile
from .source import DeclaredSource, load_file, workspace_sources

__all__ = ["DeclaredSource", "ToolDef", "ToolFile", "load_file", "workspace_sources"]
