"""codemode: agents use MCP tools by writing Python in a fast, sandboxed, persistent session.

The public API is what this module exports; everything else is private and may change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .context import CallContext
from .errors import (
    BudgetExceeded,
    CodemodeError,
    ConfigError,
    ExecutorError,
    LLMAuthError,
    LLMError,
    SandboxUnavailable,
    SessionClosed,
    ToolArgumentError,
    ToolDenied,
    ToolError,
    ToolNotFound,
)
from .execution import Executor, InProcessExecutor, SubprocessExecutor, close_pools
from .result import ErrorInfo, ExecutionResult
from .session import Session, SyncSession

if TYPE_CHECKING:
    from .agent import Agent, LLMConfig, TaskResult, aexecute_task, create_agent, execute_task

# The agent runner is imported on first use: `import codemode` stays light.
_AGENT_NAMES = frozenset(
    {"Agent", "LLMConfig", "TaskResult", "aexecute_task", "create_agent", "execute_task"}
)


def __getattr__(name: str) -> Any:
    if name in _AGENT_NAMES:
        from . import agent

        return getattr(agent, name)
    raise AttributeError(f"module 'codemode' has no attribute {name!r}")


__all__ = [
    "Agent",
    "BudgetExceeded",
    "CallContext",
    "CodemodeError",
    "ConfigError",
    "ErrorInfo",
    "ExecutionResult",
    "Executor",
    "ExecutorError",
    "InProcessExecutor",
    "LLMAuthError",
    "LLMConfig",
    "LLMError",
    "SandboxUnavailable",
    "Session",
    "SessionClosed",
    "SubprocessExecutor",
    "SyncSession",
    "TaskResult",
    "ToolArgumentError",
    "ToolDenied",
    "ToolError",
    "ToolNotFound",
    "aexecute_task",
    "close_pools",
    "create_agent",
    "execute_task",
]
