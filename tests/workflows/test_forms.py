"""Forms: fields from tool data, earlier steps and a person; submitted to the real memory
server; a half-filled form survives a restart."""

from __future__ import annotations

import json
from typing import Any

import pytest

from codemode import SubprocessExecutor
from codemode.workflows import arun_workflow, scripted_asker

from .conftest import Space

pytestmark = pytest.mark.anyio

FORM = """
name: card
inputs:
  root: {type: string}
steps:
  - code: "['met at a conference', 'likes engines']"
    output: notes
  - id: card
    form:
      schema:
        type: object
        properties:
          name: {type: string, minLength: 2}
          entityType: {type: string, enum: [person, company]}
          observations: {type: array, items: {type: string}}
        required: [name, entityType, observations]
      fields:
        name: {tool: fs.read_text_file, args: {path: "${inputs.root}/contact.txt"},
               pick: "${strip(result.content)}"}
        observations: {value: "${notes}"}
      submit: memory.create_entities
      submit_args: {entities: ["${form}"]}
      message: "Complete the card of ${inputs.root}"
    output: card
result: "${card.form}"
"""


def stored(space: Space) -> list[dict[str, Any]]:
    if not space.memory_file.exists():
        return []
    rows = [json.loads(line) for line in space.memory_file.read_text().splitlines() if line]
    return [r for r in rows if r.get("type") == "entity"]


async def test_a_form_fills_from_tool_data_earlier_steps_and_a_person_then_submits(
    space: Space,
) -> None:
    (space.files / "contact.txt").write_text("  Ada Lovelace\n")
    path = space.write("card.yaml", FORM)
    asked: list[Any] = []
    answers = scripted_asker([{"entityType": "robot"}, {"entityType": "person"}])

    async def asker(message: str, schema: Any) -> Any:
        asked.append(schema)
        return await answers(message, schema)

    result = await arun_workflow(path, base=space.base, inputs={"root": str(space.files)},
                                 executor=SubprocessExecutor(), asker=asker)  # fmt: skip
    assert result.status == "succeeded", result.error
    form = {"name": "Ada Lovelace", "entityType": "person",
            "observations": ["met at a conference", "likes engines"]}  # fmt: skip
    assert result.result == form
    # the person was asked only for what no source filled, and asked again when it did not fit
    assert [list(s["properties"]) for s in asked] == [["entityType"], ["entityType"]]
    assert "did not fit" in answers.asked[1]  # type: ignore[attr-defined]
    assert [{k: r[k] for k in form} for r in stored(space)] == [form]


async def test_a_half_filled_form_survives_a_restart_and_is_submitted_once(
    space: Space,
) -> None:
    (space.files / "contact.txt").write_text("Grace Hopper\n")
    path = space.write("card.yaml", FORM)
    first = await arun_workflow(path, base=space.base, inputs={"root": str(space.files)},
                                executor=SubprocessExecutor())  # fmt: skip
    assert (first.status, first.step) == ("waiting", "card")
    assert "entityType" in (first.error or "") and stored(space) == []
    (space.files / "contact.txt").write_text("Somebody Else\n")  # not read again on resume
    answer = json.dumps({"entityType": "person"})
    out = space.codemode("workflow", "resume", first.run_id, "--answer", f"card={answer}",
                         "--no-interactive", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["result"]["name"] == "Grace Hopper"
    assert [r["name"] for r in stored(space)] == ["Grace Hopper"]
    fields = [e["name"] for e in space.journal(first.run_id) if e.get("ev") == "field"]
    assert sorted(fields) == ["entityType", "name", "observations"]  # each filled once
    again = space.codemode("workflow", "resume", first.run_id, "--no-interactive")
    assert again.returncode == 0 and len(stored(space)) == 1  # a finished run stays finished
