"""Artifacts round-trip exactly, list their metadata without data, and refuse lossy values."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from codemode.errors import NotFound, ValidationError
from codemode.memory.artifacts import Artifacts
from codemode.memory.state import State
from codemode.storage import FileStorage

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def artifacts(tmp_path: Path) -> Artifacts:
    return Artifacts(FileStorage(tmp_path))


@pytest.mark.parametrize(
    "value",
    [
        b"\x00\xffbinary",
        b"",
        "text with ünïcode and a lone surrogate \ud800",
        "",
        {"a": [1, 2.5, None, True, {"b": "c"}], "n": -3},
        [],
        42,
        None,
        1e308,
    ],
)
async def test_values_round_trip_exactly_with_their_type(
    artifacts: Artifacts, value: object
) -> None:
    await artifacts.save("v", value)
    loaded = await artifacts.load("v")
    assert loaded == value
    assert type(loaded) is type(value)


async def test_nan_round_trips(artifacts: Artifacts) -> None:
    await artifacts.save("nan", {"x": math.nan})
    assert math.isnan((await artifacts.load("nan"))["x"])


@pytest.mark.parametrize(
    ("value", "hint"),
    [((1, 2), "tuple"), ({1: "a"}, "int key"), ({"s": {1}}, "set"), (object(), "object")],
)
async def test_values_json_would_change_are_refused(
    artifacts: Artifacts, value: object, hint: str
) -> None:
    with pytest.raises(ValidationError, match=hint):
        await artifacts.save("bad", value)
    assert not await artifacts.exists("bad")


async def test_the_listing_has_type_size_created_and_description(artifacts: Artifacts) -> None:
    await artifacts.save("report", "hello", description="the weekly report")
    await artifacts.save("blob", b"1234")
    rows = {r["name"]: r for r in await artifacts.list()}
    assert rows["report"]["type"] == "text"
    assert rows["report"]["size"] == 5
    assert rows["report"]["description"] == "the weekly report"
    assert rows["report"]["created"].endswith("Z")
    assert (rows["blob"]["type"], rows["blob"]["size"]) == ("bytes", 4)


async def test_delete_and_exists(artifacts: Artifacts) -> None:
    await artifacts.save("x", 1)
    assert await artifacts.exists("x")
    assert await artifacts.delete("x") is True
    assert not await artifacts.exists("x")
    with pytest.raises(NotFound):
        await artifacts.load("x")


async def test_an_unreadable_artifact_is_listed_with_an_error_beside_the_others(
    tmp_path: Path,
) -> None:
    store = FileStorage(tmp_path)
    artifacts = Artifacts(store)
    await artifacts.save("good", 1)
    await artifacts.save("bad", 2)
    store.path("artifacts", "bad").write_bytes(b"garbage")
    rows = await artifacts.list()
    assert [r["name"] for r in rows] == ["good", "bad"]
    assert "bad.rec" in rows[1]["error"]


async def test_big_bytes_stream_back_in_chunks(artifacts: Artifacts) -> None:
    data = bytes(range(256)) * 20_000
    await artifacts.save("big", data)
    info, chunks = await artifacts.stream("big")
    assert info["size"] == len(data)
    assert b"".join([c async for c in chunks]) == data


async def test_state_get_set_update_delete(tmp_path: Path) -> None:
    state = State(FileStorage(tmp_path))
    assert await state.get() == {}
    await state.set("step", 1)
    assert await state.update({"done": ["a"]}) == {"step": 1, "done": ["a"]}
    assert await state.get("step") == 1
    assert await state.get("missing", "dflt") == "dflt"
    assert await state.delete("step") is True
    assert await state.get() == {"done": ["a"]}
    await state.replace({"fresh": True})
    assert await state.get() == {"fresh": True}


async def test_state_refuses_non_json_values_and_keeps_the_old_document(tmp_path: Path) -> None:
    state = State(FileStorage(tmp_path))
    await state.set("a", 1)
    with pytest.raises(ValidationError):
        await state.set("b", (1, 2))
    assert await state.get() == {"a": 1}
