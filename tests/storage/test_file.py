"""FileStorage specifics: unreadable files are named, the rest still lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.errors import CorruptRecord
from codemode.storage import FileStorage

pytestmark = pytest.mark.anyio


async def test_a_corrupt_file_is_named_and_the_listing_still_returns_the_others(
    tmp_path: Path,
) -> None:
    store = FileStorage(tmp_path)
    await store.put("skills", "good", b"ok", {"d": 1})
    await store.put("skills", "bad", b"some data", {"d": 2})
    path = store.path("skills", "bad")
    path.write_bytes(path.read_bytes()[:-3])
    listing = await store.list("skills")
    assert listing.names() == ["good"]
    assert [b.name for b in listing.bad] == ["bad"]
    assert str(path) in listing.bad[0].message
    with pytest.raises(CorruptRecord, match=str(path)):
        await store.read("skills", "bad")


async def test_a_file_that_is_not_a_record_is_reported_as_corrupt(tmp_path: Path) -> None:
    store = FileStorage(tmp_path)
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "junk.rec").write_text("hello")
    with pytest.raises(CorruptRecord, match=r"junk\.rec"):
        await store.info("artifacts", "junk")


async def test_flipped_bits_in_the_data_fail_the_checksum(tmp_path: Path) -> None:
    store = FileStorage(tmp_path)
    await store.put("artifacts", "a", b"abcdef")
    path = store.path("artifacts", "a")
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptRecord, match="checksum"):
        await store.read("artifacts", "a")
    _, chunks = await store.stream("artifacts", "a")
    with pytest.raises(CorruptRecord, match="checksum"):
        _ = [c async for c in chunks]


async def test_records_are_plain_files_under_the_base(tmp_path: Path) -> None:
    store = FileStorage(tmp_path)
    await store.put("artifacts", "report", b"x")
    assert (tmp_path / "artifacts" / "report.rec").is_file()
