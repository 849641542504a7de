"""Budgets per run and per session: tool calls (in total, per tool), bytes received from
tools, seconds of running code, bytes of output. Exceeding one raises ``BudgetExceeded``
naming the budget and where to raise it (``codemode.budget.config``)."""

from __future__ import annotations

from .config import BudgetConfig, Limits

__all__ = ["BudgetConfig", "Limits"]
