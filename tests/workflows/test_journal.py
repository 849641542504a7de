"""The run journal: a half-written last event (a crash mid-write) is dropped, not glued
to the next one."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.workflows.journal import FileJournals

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_torn_last_event_is_dropped_before_the_next_append(tmp_path: Path) -> None:
    journals = FileJournals(tmp_path)
    await journals.append("r1", {"ev": "run"})
    await journals.append("r1", {"ev": "start", "step": "a"})
    journals.close("r1")
    with open(tmp_path / "r1.jsonl", "ab") as fh:
        fh.write(b'{"ev":"done","step":"a","out')  # the process died here
    assert [e["ev"] for e in await journals.read("r1")] == ["run", "start"]
    again = FileJournals(tmp_path)  # the resuming process
    await again.append("r1", {"ev": "resume"})
    await again.append("r1", {"ev": "done", "step": "a"})
    again.close("r1")
    assert [e["ev"] for e in await again.read("r1")] == ["run", "start", "resume", "done"]
