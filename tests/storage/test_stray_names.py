"""A stray entry whose name is not a record name (not UTF-8, bad characters) never breaks a
listing: what is valid is listed, the stray entry is reported with where it is and the fix."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from redis_server import RedisServer

from codemode import Session, SubprocessExecutor
from codemode.memory import Memory
from codemode.storage.redis import RedisStorage

pytestmark = pytest.mark.anyio


def codemode(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codemode", *args], capture_output=True, text=True, timeout=120
    )


def workspace_with_stray_files(tmp_path: Path) -> Path:
    base = tmp_path / "ws"
    saved = codemode(
        "run", "--base", str(base), "--executor", "subprocess", "-c",
        "artifacts.save('good', 'hello')\n"
        "skills.create('greet', 'def run(name):\\n    return \"hi \" + name', 'Say hi.')",
    )  # fmt: skip
    assert saved.returncode == 0, saved.stderr
    for kind in (b"artifacts", b"skills"):
        with open(os.fsencode(base) + b"/" + kind + b"/caf\xe9.rec", "wb") as f:
            f.write(b"not a record")
    (base / "artifacts" / "two words.rec").write_bytes(b"x")
    return base


def test_artifacts_list_shows_the_good_ones_and_says_how_to_fix_the_stray_files(
    tmp_path: Path,
) -> None:
    base = workspace_with_stray_files(tmp_path)
    done = codemode("artifacts", "list", "--base", str(base))
    assert done.returncode == 0, done.stderr
    assert [line.split()[:3] for line in done.stdout.splitlines()] == [["good", "text", "5"]]
    folder = base / "artifacts"
    assert done.stderr.splitlines() == [
        f"warning: {folder}/caf\\xe9.rec: its name is not valid UTF-8; skipped. Rename it "
        f"(e.g. mv $'{folder}/caf\\xe9.rec' {folder}/renamed.rec) or delete it",
        f"warning: {folder}/two words.rec: 'two words' is not a valid record name (1-200 "
        "letters, digits, '_', '-', '.', '@', '=' or '+', not starting with '.' or '-'); "
        f"skipped. Rename it (e.g. mv '{folder}/two words.rec' {folder}/renamed.rec) or "
        "delete it",
    ]


def test_skills_list_survives_a_stray_file(tmp_path: Path) -> None:
    base = workspace_with_stray_files(tmp_path)
    done = codemode("skills", "list", "--base", str(base))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["greet", "v1"]
    assert done.stderr.startswith(f"warning: {base}/skills/caf\\xe9.rec: its name is not valid")


async def test_the_agents_code_lists_and_uses_what_is_valid(tmp_path: Path) -> None:
    base = workspace_with_stray_files(tmp_path)
    memory = Memory.from_workspace(base)
    async with Session(SubprocessExecutor(), memory=memory) as s:
        r = await s.run(
            "rows = artifacts.list()\n"
            "[(x['name'], 'error' in x) for x in rows], skills.greet(name='ann')"
        )
    await memory.aclose()
    assert r.is_ok, r.to_text()
    names, greeting = r.value
    assert sorted(map(tuple, names)) == [("caf\\xe9", True), ("good", False), ("two words", True)]
    assert greeting == "hi ann"


@pytest.mark.redis
async def test_a_redis_field_that_is_not_utf8_is_reported_with_the_command_to_remove_it(
    redis_server: RedisServer,
) -> None:
    store = RedisStorage(redis_server.url, prefix=f"t-{uuid.uuid4().hex[:8]}")
    try:
        await store.put("artifacts", "good", b"data", {"type": "bytes"})
        key = f"{store.prefix}:artifacts:meta"
        await store._r().hset(key, b"caf\xe9", b'{"size": 1, "crc": 0, "meta": {}}')
        listing = await store.list("artifacts")
    finally:
        await store.aclose()
    assert listing.names() == ["good"]
    [bad] = listing.bad
    assert bad.name == "caf\\xe9" and bad.where == f"{key}[caf\\xe9]"
    assert bad.message == (
        f"{key}[caf\\xe9]: its name is not valid UTF-8; skipped. "
        f"Remove it with: redis-cli HDEL {key} $'caf\\xe9'"
    )
