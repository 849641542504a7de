"""Without a model: run the saved skill that clearly matches the task, or say what to set up.

The match is lexical: the skill library's ranking picks a candidate, and it is taken
only when most words of its name appear in the task (``double_number`` for "double the
number x=21"). Arguments come from ``name=value`` (or ``name: value``) in the task text;
a missing required one is a clear error listing them. Anything else is
``success=False`` with how to configure a model: never a made-up answer.
"""

from __future__ import annotations

import ast
import re
import time
from typing import Any

from .result import CodeRun, Step, TaskResult

MIN_NAME_COVERAGE = 0.5

NO_LLM = (
    "no LLM is configured, and no saved skill matches this task. Configure a model: set "
    "OPENAI_API_KEY (OpenAI or any compatible server with OPENAI_BASE_URL), "
    "AZURE_OPENAI_ENDPOINT + AZURE_OPENAI_API_KEY + AZURE_OPENAI_DEPLOYMENT_NAME, or "
    "ANTHROPIC_API_KEY; or pass create_agent(llm_provider=..., llm_api_key=...); or add an "
    '"llm" section to the workspace config. Inside `codemode serve`, a client that '
    "supports MCP sampling lends its own model."
)


def _arguments(task: str, params: list[dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for p in params:
        name = str(p.get("name", ""))
        m = re.search(
            rf"(?<![\w.]){re.escape(name)}\s*[=:]\s*"
            r"(\"[^\"]*\"|'[^']*'|\[[^\]]*\]|\{[^}]*\}|[^\s,;]+)",
            task,
        )
        if m is None:
            continue
        raw = m.group(1)
        try:
            found[name] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            found[name] = raw.strip("\"'")
    return found


def _coverage(task: str, name: str) -> float:
    from codemode.tools.search import tokenize

    words = set(tokenize(name.replace("_", " ")))
    if not words:
        return 0.0
    return len(words & set(tokenize(task))) / len(words)


async def rule_based(task: str, session: Any, *, reason: str = NO_LLM) -> TaskResult:
    """Invoke the skill that clearly matches ``task``; else ``success=False`` with ``reason``."""
    t0 = time.perf_counter()

    def done(**kw: Any) -> TaskResult:
        return TaskResult(
            task=task, provider="none", duration_ms=(time.perf_counter() - t0) * 1000, **kw
        )

    memory = getattr(session, "memory", None)
    rows = await memory.skills.search(task, 5) if memory is not None else []
    best = next((r for r in rows if _coverage(task, r["name"]) >= MIN_NAME_COVERAGE), None)
    if best is None:
        return done(success=False, error=reason, stop_reason="no_llm")
    name = best["name"]
    params = list(best.get("parameters") or [])
    args = _arguments(task, params)
    missing = [p for p in params if p.get("required") and p["name"] not in args]
    if missing:
        listed = ", ".join(
            f"{p['name']}"
            + (f" ({p['type']})" if p.get("type") else "")
            + (f": {p['description']}" if p.get("description") else "")
            for p in missing
        )
        return done(
            success=False,
            stop_reason="skill_error",
            error=(
                f"the saved skill {name!r} matches this task but needs: {listed}. Give them in "
                f"the task as name=value (e.g. {missing[0]['name']}=...), or configure an LLM."
            ),
        )
    from ..memory.skills.model import invoke_code

    code = invoke_code(name, args)
    result = await session.run(code)
    text = result.to_text()
    step = Step(1, "code", f"skill {name}", runs=[CodeRun(code, text, result.is_ok, 0.0)])
    if not result.is_ok:
        return done(
            success=False,
            stop_reason="skill_error",
            output=result.stdout,
            steps=[step],
            error=f"the saved skill {name!r} failed: {result.error}",
        )
    return done(
        success=True,
        stop_reason="skill",
        result=result.value if result.has_value else None,
        output=result.stdout,
        steps=[step],
        model=f"skill:{name}",
    )
