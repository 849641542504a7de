"""The ``"code_checks"`` config section (cheap to import).

```json
{"code_checks": {"mode": "reject", "forbidden_imports": ["subprocess", "socket"],
                 "forbidden_calls": ["eval", "exec", "os.system", "os.exec*"]}}
```

Each list replaces its default (``DEFAULT_*`` below). Modules forbid their submodules too;
calls and attributes are globs on dotted names (``os.exec*``), resolved through the
cell's import aliases (``import os as o; o.system()`` is ``os.system``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_IMPORTS: tuple[str, ...] = (
    "ctypes",
    "_ctypes",
    "cffi",
    "subprocess",
    "_posixsubprocess",
    "socket",
    "_socket",
    "multiprocessing",
    "pty",
)
DEFAULT_CALLS: tuple[str, ...] = (
    "eval",
    "exec",
    "compile",
    "__import__",
    "breakpoint",
    "importlib.import_module",
    "os.system",
    "os.popen",
    "os.exec*",
    "os.spawn*",
    "os.posix_spawn*",
    "os.fork",
    "os.forkpty",
    "os.kill",
    "os.killpg",
)
DEFAULT_ATTRIBUTES: tuple[str, ...] = (
    "__subclasses__",
    "__globals__",
    "__builtins__",
    "__code__",
    "__closure__",
    "__bases__",
    "__base__",
    "__mro__",
    "__loader__",
    "f_globals",
    "f_locals",
    "f_back",
    "f_builtins",
    "gi_frame",
    "cr_frame",
    "ag_frame",
    "tb_frame",
)


class CodeChecksConfig(BaseModel):
    """Checks of the code before it runs: defence in depth, never the boundary (the sandbox
    is). ``warn`` runs the code and reports findings in the result's warnings; ``reject``
    refuses to run it; ``off`` checks nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["off", "warn", "reject"] = "warn"
    forbidden_imports: tuple[str, ...] = Field(default=DEFAULT_IMPORTS)
    forbidden_calls: tuple[str, ...] = Field(default=DEFAULT_CALLS)
    forbidden_attributes: tuple[str, ...] = Field(default=DEFAULT_ATTRIBUTES)


__all__ = ["DEFAULT_ATTRIBUTES", "DEFAULT_CALLS", "DEFAULT_IMPORTS", "CodeChecksConfig"]
