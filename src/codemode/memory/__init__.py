"""The agent's memory: skills, artifacts, state and deps, behind one ``Memory`` object.

``Memory`` serves the worker's ``skills.*``/``artifacts.*``/``state.*``/``deps.*`` calls, the
Python SDK, the ``codemode skills|artifacts|state|deps`` commands (``memory.cli``) and the
memory tools of ``codemode serve`` (``memory.server_tools``): one object, four surfaces.
``memory.capability`` declares those surfaces to ``codemode.assembly``.

The names below are imported on first use, so reading ``memory.capability`` (every
``codemode`` command does) costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .artifacts import Artifacts
    from .core import Memory
    from .deps import Deps
    from .skills import Skill, Skills
    from .state import State

__all__ = ["Artifacts", "Deps", "Memory", "Skill", "Skills", "State"]


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562)."""
    value: Any
    if name == "Memory":
        from .core import Memory as value
    elif name == "Artifacts":
        from .artifacts import Artifacts as value
    elif name == "State":
        from .state import State as value
    elif name == "Deps":
        from .deps import Deps as value
    elif name == "Skills":
        from .skills import Skills as value
    elif name == "Skill":
        from .skills import Skill as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
