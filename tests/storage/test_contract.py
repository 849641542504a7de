"""The contract every Storage backend keeps, run against FileStorage and RedisStorage."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator

import pytest

from codemode.errors import NotFound, ValidationError
from codemode.storage import Storage

pytestmark = pytest.mark.anyio


async def test_a_record_round_trips_with_its_metadata(storage: Storage) -> None:
    await storage.put("artifacts", "a", b"hello", {"type": "text", "n": 1})
    info, data = await storage.read("artifacts", "a")
    assert data == b"hello"
    assert (info.name, info.size, info.meta) == ("a", 5, {"type": "text", "n": 1})


async def test_an_empty_value_round_trips(storage: Storage) -> None:
    await storage.put("artifacts", "empty", b"")
    info, data = await storage.read("artifacts", "empty")
    assert (info.size, data) == (0, b"")


async def test_put_replaces_the_whole_record(storage: Storage) -> None:
    await storage.put("artifacts", "a", b"old value", {"v": 1})
    await storage.put("artifacts", "a", b"new", {"v": 2})
    info, data = await storage.read("artifacts", "a")
    assert (data, info.meta) == (b"new", {"v": 2})


async def test_reading_a_missing_record_raises_not_found(storage: Storage) -> None:
    with pytest.raises(NotFound, match="nope"):
        await storage.read("artifacts", "nope")
    with pytest.raises(NotFound):
        await storage.info("artifacts", "nope")
    with pytest.raises(NotFound):
        await storage.stream("artifacts", "nope")


async def test_listing_gives_metadata_sorted_by_name_per_kind(storage: Storage) -> None:
    await storage.put("skills", "b", b"x" * 10, {"d": "bee"})
    await storage.put("skills", "a", b"y", {"d": "ay"})
    await storage.put("artifacts", "c", b"z")
    listing = await storage.list("skills")
    assert listing.names() == ["a", "b"]
    assert [(r.size, r.meta["d"]) for r in listing.records] == [(1, "ay"), (10, "bee")]
    assert listing.bad == []


async def test_listing_filters_by_prefix(storage: Storage) -> None:
    for name in ("x@1", "x@2", "y@1"):
        await storage.put("skill_versions", name, b"")
    assert (await storage.list("skill_versions", prefix="x@")).names() == ["x@1", "x@2"]


async def test_delete_removes_and_reports_whether_there_was_a_record(storage: Storage) -> None:
    await storage.put("state", "s", b"{}")
    assert await storage.exists("state", "s")
    assert await storage.delete("state", "s") is True
    assert await storage.delete("state", "s") is False
    assert not await storage.exists("state", "s")
    assert (await storage.list("state")).names() == []


async def test_large_values_stream_in_chunks_from_an_iterator(storage: Storage) -> None:
    parts = [os.urandom(300_000) for _ in range(5)]
    await storage.put("artifacts", "big", iter(parts), {"k": "v"})
    info, chunks = await storage.stream("artifacts", "big", chunk_size=256_000)
    got = [c async for c in chunks]
    assert info.size == 1_500_000
    assert all(len(c) <= 256_000 for c in got)
    assert b"".join(got) == b"".join(parts)
    assert (await storage.read("artifacts", "big"))[1] == b"".join(parts)


async def test_values_larger_than_one_chunk_round_trip_from_bytes(storage: Storage) -> None:
    data = os.urandom(3 * (1 << 20) + 17)
    await storage.put("artifacts", "big", data)
    assert (await storage.read("artifacts", "big"))[1] == data


async def test_async_iterables_are_accepted_as_values(storage: Storage) -> None:
    async def gen() -> AsyncIterator[bytes]:
        for i in range(3):
            yield bytes([i]) * 1000

    await storage.put("artifacts", "agen", gen())
    assert (await storage.read("artifacts", "agen"))[
        1
    ] == b"\0" * 1000 + b"\1" * 1000 + b"\2" * 1000


async def test_a_writer_that_fails_half_way_leaves_the_old_value(storage: Storage) -> None:
    await storage.put("artifacts", "a", b"old", {"v": 1})

    def broken() -> Iterator[bytes]:
        yield b"x" * (1 << 20)
        raise RuntimeError("producer died")

    with pytest.raises(RuntimeError, match="producer died"):
        await storage.put("artifacts", "a", broken(), {"v": 2})
    info, data = await storage.read("artifacts", "a")
    assert (data, info.meta) == (b"old", {"v": 1})
    assert (await storage.list("artifacts")).names() == ["a"]


async def test_generation_changes_on_every_write_and_delete(storage: Storage) -> None:
    g0 = await storage.generation("skills")
    await storage.put("skills", "a", b"1")
    g1 = await storage.generation("skills")
    await storage.put("skills", "a", b"2")
    g2 = await storage.generation("skills")
    await storage.delete("skills", "a")
    g3 = await storage.generation("skills")
    assert len({g0, g1, g2, g3}) == 4


async def test_invalid_names_and_kinds_are_refused_before_writing(storage: Storage) -> None:
    for bad in ("", "../etc", "a/b", ".hidden", "-opt", "x" * 201, "sp ace", "a\n", "a\x00"):
        with pytest.raises(ValidationError):
            await storage.put("artifacts", bad, b"")
    for kind in ("Bad Kind", "artifacts\n"):
        with pytest.raises(ValidationError):
            await storage.put(kind, "a", b"")
    assert (await storage.list("artifacts")).names() == []


async def test_metadata_must_be_json(storage: Storage) -> None:
    with pytest.raises(ValidationError, match="JSON"):
        await storage.put("artifacts", "a", b"", {"x": object()})


async def test_the_lock_serialises_read_modify_write(storage: Storage) -> None:
    await storage.put("state", "counter", b"0")

    async def bump() -> None:
        async with storage.lock("state", "counter"):
            _, raw = await storage.read("state", "counter")
            await asyncio.sleep(0)
            await storage.put("state", "counter", str(int(raw) + 1).encode())

    await asyncio.gather(*(bump() for _ in range(20)))
    assert (await storage.read("state", "counter"))[1] == b"20"


async def test_a_held_lock_times_out_with_a_clear_error(storage: Storage) -> None:
    from codemode.errors import StorageUnavailable

    async with storage.lock("state", "x"):
        with pytest.raises(StorageUnavailable, match="locked"):
            async with storage.lock("state", "x", timeout=0.1):
                pass
    async with storage.lock("state", "x", timeout=1):
        pass


async def test_a_reader_streaming_a_value_is_not_disturbed_by_a_replace(storage: Storage) -> None:
    old = b"a" * (3 << 20)
    await storage.put("artifacts", "v", old)
    _, chunks = await storage.stream("artifacts", "v", chunk_size=1 << 20)
    first = await chunks.__anext__()
    await storage.put("artifacts", "v", b"b" * (3 << 20))
    rest = [c async for c in chunks]
    assert first + b"".join(rest) == old
