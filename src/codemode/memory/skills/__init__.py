"""Skills: reusable code the agent saves, finds again and runs in its session's worker."""

from __future__ import annotations

from .library import Skills
from .model import Skill, analyse_code, check_skill_name, parse_skill_md

__all__ = ["Skill", "Skills", "analyse_code", "check_skill_name", "parse_skill_md"]
