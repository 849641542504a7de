"""codemode: agents use MCP tools by writing Python in a fast, sandboxed, persistent session.

The public API is what this module exports; everything else is private and may change.
"""

from __future__ import annotations

from .context import CallContext
from .errors import (
    CodemodeError,
    ConfigError,
    ExecutorError,
    SandboxUnavailable,
    SessionClosed,
    ToolArgumentError,
    ToolError,
    ToolNotFound,
)
from .execution import Executor, InProcessExecutor, SubprocessExecutor, close_pools
from .result import ErrorInfo, ExecutionResult
from .session import Session, SyncSession

__all__ = [
    "CallContext",
    "CodemodeError",
    "ConfigError",
    "ErrorInfo",
    "ExecutionResult",
    "Executor",
    "ExecutorError",
    "InProcessExecutor",
    "SandboxUnavailable",
    "Session",
    "SessionClosed",
    "SubprocessExecutor",
    "SyncSession",
    "ToolArgumentError",
    "ToolError",
    "ToolNotFound",
    "close_pools",
]
