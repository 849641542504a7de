"""Texts the MCP server shows to models: its instructions and each tool's description.

They are package data (Markdown files beside this module), read with
``importlib.resources``. They never contain dynamic lists (tool names, servers, counts),
so the bytes a client caches in its prompt stay the same from one start to the next.
"""
