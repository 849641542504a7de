"""An ask step's schema comes from whoever wrote the workflow (a client of ``serve``):
checking an answer against it never makes the host fetch a URL or run its regexes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from schema_host import schema_listener

from codemode import SubprocessExecutor
from codemode.workflows import arun_workflow, scripted_asker
from codemode.workflows.ask import ask


@pytest.fixture
def listener() -> Iterator[tuple[str, list[str]]]:
    """A URL on loopback that answers a schema naming a secret, and the paths requested."""
    with schema_listener("/internal", "internal-secret") as found:
        yield found


@pytest.mark.anyio
async def test_a_remote_ref_in_an_ask_schema_is_never_fetched(
    tmp_path: Path, listener: tuple[str, list[str]]
) -> None:
    url, hits = listener
    wf = {"steps": [{"ask": "n?", "schema": {"type": "object", "properties": {
        "n": {"$ref": url}}}}]}  # fmt: skip
    asker = scripted_asker([{"n": "x"}, {"n": "y"}])
    result = await arun_workflow(wf, base=tmp_path, executor=SubprocessExecutor(), asker=asker)
    assert hits == []
    assert not any("internal-secret" in m for m in asker.asked)  # type: ignore[attr-defined]
    assert result.result == {"n": "x"}


@pytest.mark.anyio
@pytest.mark.timeout(120, method="thread")  # the regex holds the GIL: only a thread can end it
async def test_an_ask_schema_s_pattern_is_not_run_on_the_host(tmp_path: Path) -> None:
    wf = {"steps": [{"ask": "s?", "schema": {"type": "object", "properties": {
        "s": {"type": "string", "pattern": "^(a+)+$"}}}}]}  # fmt: skip
    answer = {"s": "a" * 40 + "!"}  # hours of backtracking for Python's re
    result = await arun_workflow(
        wf, base=tmp_path, executor=SubprocessExecutor(), asker=scripted_asker([answer])
    )
    assert result.result == answer


@pytest.mark.anyio
async def test_an_answer_its_schema_cannot_check_is_refused_not_taken_unchecked() -> None:
    asker = scripted_asker([{"n": 1}, {"n": 2}])
    answer = await ask(asker, "n?", {"$ref": "#", "type": "object"})
    assert answer.action == "decline"
    assert "could not be checked" in asker.asked[1]  # type: ignore[attr-defined]
