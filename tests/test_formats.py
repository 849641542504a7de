"""Versions on every boundary: stored records carry a format, host and worker a protocol."""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import codemode_worker
from codemode import ExecutorError, InProcessExecutor, Session, SubprocessExecutor
from codemode.errors import CorruptRecord
from codemode.execution.base import PROTOCOL_VERSION, check_protocol
from codemode.memory import Memory
from codemode.memory.formats import CURRENT, FORMAT_KEY
from codemode.memory.skills import Skills
from codemode.storage import FileStorage
from codemode_worker import protocol

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXPECTED: dict[str, Any] = json.loads((FIXTURES / "workspace-0.1.0.expected.json").read_text())


@pytest.fixture
def old_workspace(tmp_path: Path) -> Path:
    """A copy of the workspace codemode 0.1.0 wrote (tests/fixtures/make_workspace_0_1_0.py)."""
    return Path(shutil.copytree(FIXTURES / "workspace-0.1.0", tmp_path / "ws"))


async def test_a_workspace_written_by_0_1_0_reads_back_exactly(old_workspace: Path) -> None:
    m = Memory.from_workspace(old_workspace)
    try:
        assert await m.skills.list() == EXPECTED["skills"]
        for name, skill in EXPECTED["skill"].items():
            assert (await m.skills.get(name)).to_dict() == skill
        assert await m.skills.versions("slugify") == EXPECTED["versions"]
        assert await m.artifacts.list() == EXPECTED["artifacts"]
        values = EXPECTED["artifact_values"]
        assert await m.artifacts.load("blob") == base64.b64decode(values["blob"])
        assert await m.artifacts.load("note") == values["note"]
        assert await m.artifacts.load("table") == values["table"]
        assert await m.state.get() == EXPECTED["state"]
        assert m.deps is not None and m.deps.configured == ["six==1.17.0"]  # old top-level key
    finally:
        await m.aclose()


async def test_its_skills_run_and_roll_back_and_new_writes_carry_the_format(
    old_workspace: Path,
) -> None:
    async with Session.from_base(old_workspace, executor=SubprocessExecutor()) as s:
        r = await s.run("skills.slugify(text='Hello World!'), await skills.add_async.aio(2, 3)")
        assert r.value == ["hello-world", 5]
        await s.run("skills.rollback('slugify', 1)\nstate.set('cursor', 43)")
        r = await s.run("skills.slugify(text='A B'), state.get('nested')")
        assert r.value == ["a-b", EXPECTED["state"]["nested"]]
    store = FileStorage(old_workspace)
    assert (await store.info("skills", "slugify")).meta[FORMAT_KEY] == CURRENT["skills"]
    assert (await store.info("state", "state")).meta[FORMAT_KEY] == CURRENT["state"]
    assert FORMAT_KEY not in (await store.info("artifacts", "blob")).meta  # untouched: as 0.1.0


async def test_a_record_from_a_newer_release_is_refused_not_misread(tmp_path: Path) -> None:
    store = FileStorage(tmp_path)
    m = Memory(store)
    await m.skills.create("fine", "def run():\n    return 1", "A skill.")
    info, raw = await store.read("skills", "fine")
    await store.put("skills", "future", raw, {**info.meta, FORMAT_KEY: 99})
    await m.artifacts.save("a", b"x")
    info, raw = await store.read("artifacts", "a")
    await store.put("artifacts", "a", raw, {**info.meta, FORMAT_KEY: 99})
    newer = "written by a newer codemode (format 99; this one reads formats up to 1)"
    with pytest.raises(CorruptRecord, match=re.escape(f"skills/future was {newer}: upgrade")):
        await Skills(store).get("future")
    with pytest.raises(CorruptRecord, match=re.escape(newer)):
        await m.artifacts.load("a")
    rows = {r["name"]: r for r in await m.skills.list()}
    assert "error" not in rows["fine"] and newer in rows["future"]["error"]
    assert [r["type"] for r in await m.artifacts.list()] == ["unreadable"]


def test_host_and_worker_of_one_release_speak_the_same_protocol() -> None:
    assert protocol.VERSION == PROTOCOL_VERSION
    check_protocol(protocol.VERSION)
    with pytest.raises(ExecutorError, match="worker speaks protocol version none"):
        check_protocol(None)


class OtherReleaseWorker(SubprocessExecutor):
    """Starts the worker from a copy of codemode_worker that speaks another version."""

    def __init__(self, root: Path) -> None:
        super().__init__(pool_size=0)
        self.root = root

    def worker_config(self) -> dict[str, Any]:
        return {**super().worker_config(), "root": str(self.root)}


async def test_a_worker_speaking_another_protocol_version_is_refused(tmp_path: Path) -> None:
    pkg = Path(codemode_worker.__file__).parent
    copy = Path(shutil.copytree(pkg, tmp_path / "codemode_worker"))
    source = (copy / "protocol.py").read_text()
    (copy / "protocol.py").write_text(source.replace("VERSION = 1\n", "VERSION = 7\n", 1))
    with pytest.raises(ExecutorError) as info:
        await Session(OtherReleaseWorker(tmp_path)).start()
    assert str(info.value) == (
        "the worker speaks protocol version 7, this host speaks version 1: "
        "install the same codemode release on both sides"
    )


async def test_the_in_process_executor_checks_the_worker_package_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(protocol, "VERSION", 2)
    with pytest.raises(ExecutorError, match="worker speaks protocol version 2"):
        await Session(InProcessExecutor()).start()
