"""examples/workflows: each example validates and runs against the real fs and memory
servers (the workspace the examples' README describes)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from codemode import SubprocessExecutor
from codemode.workflows import arun_workflow, load_workflow, scripted_asker

from .conftest import Space

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "workflows"


@pytest.fixture
def data(space: Space) -> Path:
    """The examples' data folder, copied where the workspace's fs server may read."""
    for item in (EXAMPLES / "data").iterdir():
        target = space.files / item.name
        if item.is_dir():
            shutil.copytree(item, target)
        else:
            shutil.copy(item, target)
    return space.files


async def run(space: Space, name: str, data: Path, **options: Any) -> Any:
    result = await arun_workflow(EXAMPLES / name, base=space.base, inputs={"root": str(data)},
                                 executor=SubprocessExecutor(), **options)  # fmt: skip
    assert result.status == "succeeded", result.error
    return result.result


def test_every_example_validates() -> None:
    names = sorted(p.name for p in EXAMPLES.glob("*.yaml"))
    assert len(names) == 6
    for name in names:
        load_workflow(EXAMPLES / name)


async def test_multi_tool_chaining(space: Space, data: Path) -> None:
    out = await run(space, "multi_tool_chaining.yaml", data)
    assert out == {"remembered": 2, "names": ["ideas.txt", "todo.txt"]}
    assert sorted(space.entities()) == ["ideas.txt", "todo.txt"]


async def test_data_filtering(space: Space, data: Path) -> None:
    out = await run(space, "data_filtering.yaml", data)
    assert out == {"count": 2, "total": 1710.0, "who": ["ana", "cho"]}


async def test_control_flow(space: Space, data: Path) -> None:
    assert await run(space, "control_flow.yaml", data) == {"lines": 3, "verdict": "busy week"}


async def test_state_persistence(space: Space, data: Path) -> None:
    first = await run(space, "state_persistence.yaml", data)
    assert first == {"runs": 1, "new": ["ideas.txt", "todo.txt"]}
    (data / "notes" / "later.txt").write_text("x\n")
    second = await run(space, "state_persistence.yaml", data)  # a new session
    assert second == {"runs": 2, "new": ["later.txt"]}


async def test_skills_reuse(space: Space, data: Path) -> None:
    assert await run(space, "skills_reuse.yaml", data) == 8


async def test_form_filling(space: Space, data: Path) -> None:
    card = await run(space, "form_filling.yaml", data, asker=scripted_asker([
        {"entityType": "person"}]))  # fmt: skip
    assert card["name"] == "Ada Lovelace" and card["entityType"] == "person"
    rows = [json.loads(line) for line in space.memory_file.read_text().splitlines()]
    assert [(r["name"], r["entityType"]) for r in rows] == [("Ada Lovelace", "person")]
