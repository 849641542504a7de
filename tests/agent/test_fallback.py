"""Without a model: a clearly matching saved skill runs; otherwise an honest failure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.agent import Agent, create_agent

SKILL = '''
def run(number: int, times: int = 2):
    """Multiply a number."""
    print("multiplying", number)
    return number * times
'''


@pytest.fixture
def agent(base: Path) -> Iterator[Agent]:
    from codemode.memory import Memory

    async def save() -> None:
        memory = Memory.from_workspace(base)
        await memory.skills.create(
            "double_number", SKILL, "Double a number.", parameters={"number": "the number"}
        )
        await memory.aclose()

    import asyncio

    asyncio.run(save())
    with create_agent(base=base, executor="subprocess", env={}) as a:
        yield a


def test_a_matching_skill_runs_with_arguments_taken_from_the_task(agent: Agent) -> None:
    assert agent.model is None
    r = agent.execute_task("double the number, number=21")
    assert r.success and r.stop_reason == "skill" and r.result == 42
    assert r.output == "multiplying 21\n" and r.model == "skill:double_number"
    result, output, error = r
    assert (result, output, error) == (42, "multiplying 21\n", None)


def test_a_matching_skill_without_its_arguments_lists_what_is_missing(agent: Agent) -> None:
    r = agent.execute_task("double a number please")
    assert not r.success and r.stop_reason == "skill_error" and r.result is None
    assert "needs: number (int): the number" in (r.error or "")
    assert "number=..." in (r.error or "")


def test_a_task_no_skill_matches_fails_and_says_how_to_configure_a_model(agent: Agent) -> None:
    r = agent.execute_task("book a flight to Lisbon")
    assert not r.success and r.stop_reason == "no_llm" and r.result is None
    for hint in ("no LLM is configured", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI"):
        assert hint in (r.error or "")


def test_without_any_skill_the_fallback_still_fails_honestly(base: Path) -> None:
    with create_agent(base=base, executor="subprocess", env={}) as a:
        r = a.execute_task("double the number, number=21")
    assert not r.success and r.stop_reason == "no_llm"


def test_a_failing_skill_is_a_failure_with_its_error(agent: Agent) -> None:
    r = agent.execute_task("double the number number='x' times=None")
    assert not r.success and r.stop_reason == "skill_error"
    assert "TypeError" in (r.error or "")
