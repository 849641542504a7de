"""The agent's memory: skills, artifacts, state and deps, behind one ``Memory`` object.

``Memory`` serves the worker's ``skills.*``/``artifacts.*``/``state.*``/``deps.*`` calls, the
Python SDK, the ``codemode skills|artifacts|state|deps`` commands (``memory.cli``) and the
memory tools of ``codemode serve`` (``memory.server_tools``): one object, four surfaces.
"""

from __future__ import annotations

from .artifacts import Artifacts
from .core import Memory
from .deps import Deps
from .skills import Skill, Skills
from .state import State

__all__ = ["Artifacts", "Deps", "Memory", "Skill", "Skills", "State"]
