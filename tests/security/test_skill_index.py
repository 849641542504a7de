"""A library of big skills never stalls the host: other sessions keep answering.

Saving and searching skills builds a lexical index of their code; 40 skills of 250 KB
once froze every session of the host for seconds. The bystander's runs must keep
completing while the index is built, and skills past the size cap are refused clearly.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest

from codemode import Session
from codemode.errors import ValidationError
from codemode.execution.sandbox import SandboxExecutor
from codemode.memory import Memory
from codemode.memory.skills.model import MAX_CODE, MAX_NOTES
from codemode.storage import FileStorage

from .conftest import SUITE_LIMITS

pytestmark = [pytest.mark.anyio, pytest.mark.security]

WORDS = [f"w{i}x{j}" for i in range(400) for j in range(25)]


def big_skill(i: int, size: int = 250_000) -> str:
    rnd = random.Random(i)
    body = []
    n = 0
    while n < size - 200:
        line = "# " + " ".join(rnd.choice(WORDS) for _ in range(12))
        body.append(line)
        n += len(line) + 1
    return f"def run():\n    '''Skill {i}.'''\n" + "\n".join(body) + "\n    return 1\n"


async def _tick(session: Session, stop: asyncio.Event, done: list[float]) -> None:
    while not stop.is_set():
        r = await session.run("1 + 1", timeout=60)
        assert r.value == 2, r.to_text()
        done.append(time.monotonic())


async def test_a_session_keeps_answering_while_another_saves_and_searches_big_skills(
    tmp_path: Path,
) -> None:
    memory = Memory(FileStorage(tmp_path))
    maker = Session(SandboxExecutor(limits=SUITE_LIMITS, pool_size=0), memory=memory)
    bystander = Session(SandboxExecutor(limits=SUITE_LIMITS, pool_size=0))
    async with maker, bystander:
        for i in range(40):
            code = big_skill(i)
            r = await maker.run(f"skills.create('big{i}', {code!r}, 'a big skill number {i}')")
            assert r.is_ok, r.to_text()
        stop, done = asyncio.Event(), []
        ticker = asyncio.create_task(_tick(bystander, stop, done))
        await asyncio.sleep(0.2)
        began = time.monotonic()
        r = await maker.run("skills.search('w7x3 w9x1', limit=3)", timeout=120)
        ended = time.monotonic()
        stop.set()
        await ticker
    assert r.is_ok and len(r.value) == 3, r.to_text()  # type: ignore[arg-type]
    # runs kept completing through the whole build, not only before or after it
    middle = (began + ended) / 2
    assert sum(began < t < middle for t in done) >= 3, (len(done), ended - began)
    assert sum(middle <= t < ended for t in done) >= 3, (len(done), ended - began)


async def test_a_skill_over_the_size_cap_is_refused_naming_the_cap(tmp_path: Path) -> None:
    memory = Memory(FileStorage(tmp_path))
    code = "def run():\n    return 1\n" + "#" * MAX_CODE
    with pytest.raises(ValidationError, match=f"limit is {MAX_CODE:,} chars"):
        await memory.skills.create("huge", code, "too big")
    with pytest.raises(ValidationError, match=f"limit is {MAX_NOTES}"):
        await memory.skills.create(
            "noted", "def run():\n    return 1\n", "notes too big", notes="n" * (MAX_NOTES + 1)
        )
    assert await memory.skills.list() == []


async def test_sandboxed_code_sees_the_cap_in_a_readable_error(tmp_path: Path) -> None:
    memory = Memory(FileStorage(tmp_path))
    async with Session(SandboxExecutor(limits=SUITE_LIMITS, pool_size=0), memory=memory) as s:
        code = (
            "try:\n"
            f"    skills.create('huge', 'def run():\\n    return 1\\n' + '#' * {MAX_CODE},"
            " 'too big')\n"
            "except Exception as e:\n    out = type(e).__name__ + ': ' + str(e)\nout"
        )
        r = await s.run(code)
    assert r.is_ok, r.to_text()
    assert r.value.startswith("ValidationError") and f"{MAX_CODE:,}" in r.value  # type: ignore[union-attr]
