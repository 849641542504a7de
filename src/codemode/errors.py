"""One exception tree for codemode's host side.

Errors are grouped by who must react::

    CodemodeError
    ├── ConfigError              the developer's configuration or arguments are wrong
    ├── ExecutorError            a worker could not be started or talked to
    │   └── SandboxUnavailable   isolation is required but this machine cannot provide it
    ├── RelayedCallError         a host call's error, carried back through a relay (Ray)
    ├── SessionClosed            the session was used after close()
    ├── CheckpointError          a session's namespace could not be saved or restored
    ├── ToolError                a tool call failed (the agent's code sees this as ToolError)
    │   ├── ToolNotFound         no such server or tool (carries close matches)
    │   ├── ToolArgumentError    arguments do not match the tool's input schema
    │   ├── ToolTimeout          the call exceeded its timeout and was cancelled
    │   ├── ServerUnavailable    the upstream server cannot be started or reached
    │   ├── ToolDenied           refused before it reached the tool (policy, approval)
    │   │   └── BudgetExceeded   a budget of the run or session is spent (names it)
    │   └── PrivacyBlocked       personal data was withheld (privacy ``action: block``,
    │                            a result too large or too binary to scan)
    ├── StorageError             skills, artifacts, state
    │   ├── NotFound             no record of that name
    │   ├── CorruptRecord        a stored record cannot be read (names the file/key)
    │   ├── StorageUnavailable   the backend cannot be reached (e.g. Redis down)
    │   ├── ValidationError      a record was refused before anything was written
    │   └── QuotaExceeded        the write would take the workspace over its quota
    ├── DepsError                a package spec was refused or pip failed
    └── LLMError                 the agent's model could not be reached or refused the call
        └── LLMAuthError         the provider rejected the credentials (bad or missing key)

Failures of the agent's own code are not exceptions on the host: they come back in
``ExecutionResult.error``.
"""

from __future__ import annotations


class CodemodeError(Exception):
    """Base of every error codemode raises on the host."""


class ConfigError(CodemodeError):
    """Configuration, workspace or argument problem the developer must fix."""


class ExecutorError(CodemodeError):
    """A worker could not be started, or the executor lost it."""


class SandboxUnavailable(ExecutorError):
    """Isolation was asked for but this machine cannot provide it."""


class RelayedCallError(CodemodeError):
    """A call the worker made failed on a host further away (a Ray session's actor relays
    calls to its host): ``wire`` is that host's description of the error, sent on as is."""

    def __init__(self, wire: dict[str, object]) -> None:
        super().__init__(str(wire.get("message", "")))
        self.wire = dict(wire)


class SessionClosed(CodemodeError):
    """The session is closed; open a new one."""


class CheckpointError(CodemodeError):
    """A checkpoint of a session's namespace could not be written or restored (over its
    size limit, written by another Python version, refused by the worker)."""


class ToolError(CodemodeError):
    """A tool call failed. ``server`` and ``tool`` name it when known."""

    def __init__(self, message: str, *, server: str = "", tool: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.server = server
        self.tool = tool

    def __str__(self) -> str:
        where = f"{self.server}.{self.tool}" if self.server and self.tool else self.server
        return f"{where}: {self.message}" if where else self.message


class ToolNotFound(ToolError):
    """No such server or tool; ``suggestions`` holds close names."""

    def __init__(
        self,
        message: str,
        *,
        server: str = "",
        tool: str = "",
        suggestions: list[str] | None = None,
    ) -> None:
        super().__init__(message, server=server, tool=tool)
        self.suggestions = suggestions or []


class ToolArgumentError(ToolError):
    """Arguments do not match the tool's input schema."""


class ToolTimeout(ToolError):
    """The call took longer than its timeout and was cancelled."""


class ServerUnavailable(ToolError):
    """The upstream MCP server could not be started or reached."""


class ToolDenied(ToolError):
    """The call was refused before anything reached the tool.

    ``reason`` says by what (``policy``, ``approval``, ``budget``); the message says why
    and what would change the answer.
    """

    def __init__(self, message: str, *, server: str = "", tool: str = "", reason: str = "") -> None:
        super().__init__(message, server=server, tool=tool)
        self.reason = reason


class BudgetExceeded(ToolDenied):
    """A budget is spent; ``budget`` names it (e.g. ``run.tool_calls``) and the message
    says how to raise it."""

    def __init__(
        self,
        message: str,
        *,
        server: str = "",
        tool: str = "",
        budget: str = "",
        limit: float | None = None,
        used: float | None = None,
    ) -> None:
        super().__init__(message, server=server, tool=tool, reason="budget")
        self.budget = budget
        self.limit = limit
        self.used = used


class PrivacyBlocked(ToolError):
    """Personal data was withheld: found where ``privacy.action`` is ``block``, or in a
    result that cannot be scanned (too large, binary with ``privacy.binary: block``)."""


class StorageError(CodemodeError):
    """Base for storage failures."""


class NotFound(StorageError, KeyError):
    """No record of that name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


class CorruptRecord(StorageError):
    """A stored record exists but cannot be read; the message names it."""


class StorageUnavailable(StorageError):
    """The backend cannot be reached; nothing was written."""


class ValidationError(StorageError):
    """A record was refused before anything was written (bad name, bad code...)."""


class QuotaExceeded(StorageError):
    """A write was refused (nothing was written): the workspace would exceed its quota."""


class DepsError(CodemodeError):
    """A package spec was refused, or installing it failed (carries pip's message)."""


class LLMError(CodemodeError):
    """The agent's model failed after retries: unreachable, timed out, or refused the call.

    ``provider`` names it; ``status`` is the HTTP status when there was one. The message
    quotes the provider's own text (an error body, a malformed answer), which a proxy or a
    misconfigured gateway may fill with credentials (its bearer token, another key, a
    private-key block): it passes the general credentials filter here, once for every path
    by which such an error reaches the transcript, the logs or the sandbox.
    """

    def __init__(self, message: str, *, provider: str = "", status: int | None = None) -> None:
        from codemode.redact import redact_text  # (lazy: errors is imported by everything)

        super().__init__(redact_text(message))
        self.provider = provider
        self.status = status


class LLMAuthError(LLMError):
    """The provider rejected the credentials; the message says which setting to fix."""


__all__ = [
    "BudgetExceeded",
    "CheckpointError",
    "CodemodeError",
    "ConfigError",
    "CorruptRecord",
    "DepsError",
    "ExecutorError",
    "LLMAuthError",
    "LLMError",
    "NotFound",
    "PrivacyBlocked",
    "QuotaExceeded",
    "SandboxUnavailable",
    "ServerUnavailable",
    "SessionClosed",
    "StorageError",
    "StorageUnavailable",
    "ToolArgumentError",
    "ToolDenied",
    "ToolError",
    "ToolNotFound",
    "ToolTimeout",
    "ValidationError",
]
