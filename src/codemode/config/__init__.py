"""Configuration: codemode's settings and sections (``schema``), upstream MCP servers
(``servers``), and the files both are read from (``files``)."""

from __future__ import annotations

from .files import Document, load_document, load_json_file, strip_json_comments
from .schema import (
    CONFIG_FILE,
    CONFIG_FILES,
    CORE,
    ENV_PREFIX,
    Config,
    Section,
    Settings,
    find_config_file,
    load_config,
    load_settings,
)
from .servers import (
    SERVERS_FILE,
    RemoteServerConfig,
    ServerConfig,
    StdioServerConfig,
    expand_vars,
    load_servers,
    parse_servers,
)

__all__ = [
    "CONFIG_FILE",
    "CONFIG_FILES",
    "CORE",
    "ENV_PREFIX",
    "SERVERS_FILE",
    "Config",
    "Document",
    "RemoteServerConfig",
    "Section",
    "ServerConfig",
    "Settings",
    "StdioServerConfig",
    "expand_vars",
    "find_config_file",
    "load_config",
    "load_document",
    "load_json_file",
    "load_servers",
    "load_settings",
    "parse_servers",
    "strip_json_comments",
]
