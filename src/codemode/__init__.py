"""codemode: agents use MCP tools by writing Python in a fast, sandboxed, persistent session.

The public API is what this module exports (``__all__``, checked by
``tests/test_public_api.py``); everything else is private and may change::

    from codemode import Session, SandboxExecutor, FileStorage

    async with Session(storage=FileStorage(base_path="/tmp/cm"), executor=SandboxExecutor()) as s:
        result = await s.run("1 + 1")

``import codemode`` loads only this module and the exception tree; each other name is
imported the first time it is used (PEP 562), so a script that needs ``Session`` never
pays for the MCP SDK, pydantic or Redis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    BudgetExceeded,
    CodemodeError,
    ConfigError,
    CorruptRecord,
    DepsError,
    ExecutorError,
    LLMAuthError,
    LLMError,
    NotFound,
    SandboxUnavailable,
    ServerUnavailable,
    SessionClosed,
    StorageError,
    StorageUnavailable,
    ToolArgumentError,
    ToolDenied,
    ToolError,
    ToolNotFound,
    ToolTimeout,
    ValidationError,
)

if TYPE_CHECKING:
    from .agent import Agent, LLMConfig, TaskResult, aexecute_task, create_agent, execute_task
    from .capability import Capability
    from .chain import RUN_STAGES, TOOL_STAGES, NextRun, RunEvent, RunHook
    from .config import Settings
    from .context import CallContext
    from .execution import Executor, InProcessExecutor, SubprocessExecutor, close_pools
    from .execution.sandbox import SandboxExecutor
    from .memory import Memory
    from .result import ErrorInfo, ExecutionResult
    from .session import Session, SyncSession
    from .storage import FileStorage, RedisStorage, Storage
    from .tools import (
        Middleware,
        NextCall,
        PythonSource,
        ToolCall,
        ToolRegistry,
        ToolSource,
        ToolSpec,
    )
    from .workspace import Workspace

__all__ = [
    "RUN_STAGES",
    "TOOL_STAGES",
    "Agent",
    "BudgetExceeded",
    "CallContext",
    "Capability",
    "CodemodeError",
    "ConfigError",
    "CorruptRecord",
    "DepsError",
    "ErrorInfo",
    "ExecutionResult",
    "Executor",
    "ExecutorError",
    "FileStorage",
    "InProcessExecutor",
    "LLMAuthError",
    "LLMConfig",
    "LLMError",
    "Memory",
    "Middleware",
    "NextCall",
    "NextRun",
    "NotFound",
    "PythonSource",
    "RedisStorage",
    "RunEvent",
    "RunHook",
    "SandboxExecutor",
    "SandboxUnavailable",
    "ServerUnavailable",
    "Session",
    "SessionClosed",
    "Settings",
    "Storage",
    "StorageError",
    "StorageUnavailable",
    "SubprocessExecutor",
    "SyncSession",
    "TaskResult",
    "ToolArgumentError",
    "ToolCall",
    "ToolDenied",
    "ToolError",
    "ToolNotFound",
    "ToolRegistry",
    "ToolSource",
    "ToolSpec",
    "ToolTimeout",
    "ValidationError",
    "Workspace",
    "aexecute_task",
    "close_pools",
    "create_agent",
    "execute_task",
]


def __getattr__(name: str) -> Any:
    """Import a public name on first use (and keep it)."""
    module: Any
    if name in ("Session", "SyncSession"):
        from . import session as module
    elif name in ("Executor", "InProcessExecutor", "SubprocessExecutor", "close_pools"):
        from . import execution as module
    elif name == "SandboxExecutor":
        from .execution import sandbox as module
    elif name in ("Storage", "FileStorage", "RedisStorage"):
        from . import storage as module
    elif name in ("ExecutionResult", "ErrorInfo"):
        from . import result as module
    elif name == "CallContext":
        from . import context as module
    elif name in ("RunEvent", "RunHook", "NextRun", "RUN_STAGES", "TOOL_STAGES"):
        from . import chain as module
    elif name in ("ToolRegistry", "ToolCall", "Middleware", "NextCall"):
        from .tools import registry as module
    elif name in ("ToolSpec", "ToolSource"):
        from .tools import spec as module
    elif name == "PythonSource":
        from .tools.sources import python as module
    elif name == "Memory":
        from .memory import core as module
    elif name == "Workspace":
        from . import workspace as module
    elif name == "Settings":
        from .config import schema as module
    elif name in (
        "Agent",
        "LLMConfig",
        "TaskResult",
        "aexecute_task",
        "create_agent",
        "execute_task",
    ):
        from . import agent as module
    elif name == "Capability":
        from . import capability as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
