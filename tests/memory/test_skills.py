"""Skills are validated without running, versioned, searchable and removable."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.errors import NotFound, ValidationError
from codemode.memory.skills import Skills, parse_skill_md
from codemode.storage import FileStorage

pytestmark = pytest.mark.anyio

FETCH = '''
import json

def run(url: str, retries: int = 3, *, timeout=None):
    """Fetch a URL and decode its JSON body."""
    return {"url": url, "retries": retries}
'''


async def test_create_records_the_signature_and_parameters(skills: Skills) -> None:
    skill = await skills.create(
        "fetch_json", FETCH, "Fetch JSON from a URL", parameters={"url": "the page"}
    )
    assert skill.version == 1
    assert skill.signature == "run(url: str, retries: int=3, *, timeout=None)"
    assert skill.parameters == [
        {"name": "url", "required": True, "type": "str", "description": "the page"},
        {"name": "retries", "required": False, "type": "int", "default": 3},
        {"name": "timeout", "required": False, "default": None},
    ]
    got = await skills.get("fetch_json")
    assert got.code == FETCH
    assert got.description == "Fetch JSON from a URL"


async def test_create_never_runs_the_code(skills: Skills, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').write('x')\ndef run():\n    return 1\n"
    await skills.create("side_effect", code, "writes a file at import")
    assert not marker.exists()


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("def run(:\n  pass", "syntax error at line 1"),
        ("x = 1", "must define a top-level function run"),
        ("def helper():\n  pass", "must define a top-level function run"),
        ("def run(a, /):\n  pass", "positional-only"),
        ("def run():\n  return\nawait x", "syntax error"),
        ("", "empty"),
        ("def run(x=" + "-" * 600 + "a):\n  pass", "nested too deeply"),
        ("def run(x: " + "-" * 600 + "a):\n  pass", "nested too deeply"),
        ("x = " + "-" * 5000 + "a\ndef run():\n  pass", "cannot be compiled"),
    ],
)
async def test_invalid_code_is_refused_with_a_clear_message(
    skills: Skills, code: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        await skills.create("bad", code, "d")
    assert await skills.list() == []


@pytest.mark.parametrize("name", ["1abc", "with-dash", "class", "_private", "search", "a b"])
async def test_invalid_names_are_refused(skills: Skills, name: str) -> None:
    with pytest.raises(ValidationError):
        await skills.create(name, "def run():\n  pass", "d")


async def test_names_are_unique(skills: Skills) -> None:
    await skills.create("once", "def run():\n  return 1", "d")
    with pytest.raises(ValidationError, match="already exists"):
        await skills.create("once", "def run():\n  return 2", "d")
    assert (await skills.get("once")).code.endswith("return 1")


async def test_a_description_is_required_or_taken_from_the_docstring(skills: Skills) -> None:
    with pytest.raises(ValidationError, match="description"):
        await skills.create("nodesc", "def run():\n  pass", "")
    s = await skills.create("doc", 'def run():\n  """Say hello.\n\n  More."""', "")
    assert s.description == "Say hello."


async def test_documenting_a_parameter_run_does_not_take_is_refused(skills: Skills) -> None:
    with pytest.raises(ValidationError, match="does not accept"):
        await skills.create("p", "def run(a):\n  pass", "d", parameters={"b": "nope"})
    s = await skills.create("k", "def run(**kw):\n  pass", "d", parameters={"b": "ok"})
    assert s.parameters == [{"name": "b", "required": False, "description": "ok"}]


async def test_async_run_is_recognised(skills: Skills) -> None:
    s = await skills.create("later", "async def run(x):\n  return x", "d")
    assert s.is_async


async def test_update_keeps_the_previous_version_for_rollback(skills: Skills) -> None:
    await skills.create("greet", "def run(name):\n  return 'hi ' + name", "greets")
    updated = await skills.update("greet", code="def run(name):\n  return 'hello ' + name")
    assert updated.version == 2
    assert updated.description == "greets"
    rolled = await skills.rollback("greet")
    assert rolled.version == 3
    assert "'hi '" in (await skills.get("greet")).code
    versions = await skills.versions("greet")
    assert [v["version"] for v in versions] == [1, 2, 3]
    again = await skills.rollback("greet", version=2)
    assert "'hello '" in again.code


async def test_rollback_to_a_missing_version_names_the_kept_ones(skills: Skills) -> None:
    await skills.create("one", "def run():\n  pass", "d")
    with pytest.raises(NotFound, match="no version 0"):
        await skills.rollback("one")


async def test_an_invalid_update_changes_nothing(skills: Skills) -> None:
    await skills.create("stable", "def run():\n  return 1", "d")
    with pytest.raises(ValidationError):
        await skills.update("stable", code="def nope(): pass")
    s = await skills.get("stable")
    assert (s.version, s.code) == (1, "def run():\n  return 1")


async def test_delete_removes_the_skill_and_its_versions(skills: Skills) -> None:
    await skills.create("gone", "def run():\n  return 1", "d")
    await skills.update("gone", description="d2")
    assert await skills.delete("gone") is True
    assert await skills.delete("gone") is False
    with pytest.raises(NotFound):
        await skills.get("gone")
    assert (await skills.storage.list("skill_versions")).names() == []
    assert (await skills.create("gone", "def run():\n  return 1", "d")).version == 1


async def test_get_of_a_missing_skill_suggests_close_names(skills: Skills) -> None:
    await skills.create("fetch_json", FETCH, "d")
    with pytest.raises(NotFound, match="did you mean fetch_json"):
        await skills.get("fetch_jsn")


async def test_search_ranks_by_name_description_parameters_and_code(skills: Skills) -> None:
    await skills.create("fetch_json", FETCH, "Download a JSON document over HTTP")
    await skills.create("resize_image", "def run(path, width):\n  pass", "Scale a picture")
    await skills.create(
        "count_words", "def run(text):\n  import collections\n  return 1", "Word frequencies"
    )
    assert (await skills.search("download json"))[0]["name"] == "fetch_json"
    assert (await skills.search("picture width"))[0]["name"] == "resize_image"
    assert (await skills.search("collections"))[0]["name"] == "count_words"
    assert await skills.search("zzzz") == []


async def test_search_sees_changes_made_by_another_library_on_the_same_storage(
    tmp_path: Path,
) -> None:
    a, b = Skills(FileStorage(tmp_path)), Skills(FileStorage(tmp_path))
    await a.create("alpha", "def run():\n  pass", "first letter")
    assert [r["name"] for r in await b.search("letter")] == ["alpha"]
    await a.create("beta", "def run():\n  pass", "second letter")
    assert {r["name"] for r in await b.search("letter")} == {"alpha", "beta"}
    await a.delete("alpha")
    assert [r["name"] for r in await b.search("letter")] == ["beta"]


async def test_source_omits_the_code_when_the_caller_has_the_current_version(
    skills: Skills,
) -> None:
    await skills.create("s", "def run():\n  return 1", "d")
    assert (await skills.source("s"))["code"] == "def run():\n  return 1"
    assert "code" not in await skills.source("s", have_version=1)


async def test_skill_md_has_front_matter_and_usage_notes(skills: Skills) -> None:
    s = await skills.create(
        "fetch_json",
        FETCH,
        "Fetch JSON",
        tags=["http"],
        notes="Retries on 5xx.",
        parameters={"url": "the page"},
    )
    front, body = parse_skill_md(s.skill_md())
    assert front["name"] == "fetch_json"
    assert front["description"] == "Fetch JSON"
    assert front["tags"] == ["http"]
    assert front["parameters"][0] == {
        "name": "url",
        "required": True,
        "type": "str",
        "description": "the page",
    }
    assert body == "Retries on 5xx."
