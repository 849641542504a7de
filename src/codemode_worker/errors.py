"""Exceptions the agent's code sees. Host errors arrive by name and are re-raised as these."""

from __future__ import annotations

from typing import Any


class CodemodeError(Exception):
    """Base of errors raised by codemode inside the agent's code."""

    def __init__(self, message: str = "", **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        for k, v in fields.items():
            setattr(self, k, v)


class ToolError(CodemodeError):
    """A tool call failed: ``server``, ``tool`` and ``message`` say which and why."""

    server: str = ""
    tool: str = ""

    def __str__(self) -> str:
        where = f"{self.server}.{self.tool}" if self.server and self.tool else self.server
        return f"{where}: {self.message}" if where else self.message


class ToolNotFound(ToolError, AttributeError):
    suggestions: list[str] = []  # noqa: RUF012


class ToolArgumentError(ToolError, TypeError):
    pass


class ToolTimeout(ToolError, TimeoutError):
    pass


class ServerUnavailable(ToolError):
    pass


class ToolDenied(ToolError, PermissionError):
    """Refused before it reached the tool (policy, approval); ``reason`` says by what."""

    reason: str = ""


class BudgetExceeded(ToolDenied):
    """A budget is spent: ``budget`` names it, ``limit`` and ``used`` say how far."""

    budget: str = ""
    limit: float | None = None
    used: float | None = None


class PrivacyBlocked(ToolError):
    """Personal data was withheld (the workspace's privacy action is "block")."""


class StorageError(CodemodeError):
    pass


class NotFound(StorageError, KeyError):
    def __str__(self) -> str:
        return self.message


class CorruptRecord(StorageError):
    pass


class StorageUnavailable(StorageError):
    pass


class ValidationError(StorageError, ValueError):
    pass


class QuotaExceeded(StorageError):
    pass


class DepsError(CodemodeError):
    pass


class ConfigError(CodemodeError):
    pass


class HostError(CodemodeError):
    """An error on the host that has no more specific class here."""


_BY_NAME: dict[str, type[CodemodeError]] = {
    cls.__name__: cls
    for cls in (
        CodemodeError,
        ToolError,
        ToolNotFound,
        ToolArgumentError,
        ToolTimeout,
        ServerUnavailable,
        ToolDenied,
        BudgetExceeded,
        PrivacyBlocked,
        StorageError,
        NotFound,
        CorruptRecord,
        StorageUnavailable,
        ValidationError,
        QuotaExceeded,
        DepsError,
        ConfigError,
        HostError,
    )
}


def from_wire(err: dict[str, Any]) -> CodemodeError:
    """Rebuild the exception the host reported."""
    fields = {k: v for k, v in err.items() if k not in ("type", "message")}
    cls = _BY_NAME.get(str(err.get("type", "")), HostError)
    return cls(str(err.get("message", "")), **fields)
