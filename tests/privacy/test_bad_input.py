"""Bad input through the privacy layer: binary, huge, deeply nested, non-UTF-8."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode import Session, SubprocessExecutor
from codemode.errors import PrivacyBlocked
from codemode.privacy.config import PrivacyConfig
from codemode.privacy.engine import Privacy
from codemode.privacy.tokens import TOKEN_RE
from codemode.privacy.vault import Vault
from codemode.workspace import Workspace
from codemode_worker.protocol import Blob

pytestmark = pytest.mark.anyio

PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + bytes(range(256))
ROWS = [{"id": i, "email": f"user{i}@example.com", "note": "x" * 900} for i in range(11_000)]


def bad_results() -> dict[str, Any]:
    deep: Any = "alice@example.com"
    for _ in range(5_000):
        deep = [deep]
    return {
        "png": Blob(PNG, "image/png"),
        "text_bytes": b"mail bob@example.org",
        "latin1": "Grüße an carol@example.net, Tel. +49 30 901820".encode("latin-1"),
        "surrogate": "dave@example.com \udc80 broken",
        "deep": deep,
        "huge": ROWS,
    }


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[Session]:
    base = tmp_path / "ws"
    base.mkdir()
    (base / "config.json").write_text(json.dumps({"privacy": {"enabled": True}}))
    s = Session.for_workspace(
        Workspace.open(base), executor=SubprocessExecutor(memory_limit_mb=2048)
    )
    for name, value in bad_results().items():
        s.register_tool(returning(value), server="bad", name=name)
    async with s:
        yield s


def returning(value: Any) -> Any:
    def tool() -> Any:
        return value

    return tool


def engine(**options: Any) -> Privacy:
    return Privacy(PrivacyConfig(enabled=True, **options), Vault(b"k" * 32))


async def test_binary_content_passes_with_a_warning_and_text_in_bytes_is_scanned(
    session: Session,
) -> None:
    r = await session.run(
        "png = tools.bad.png()\ntxt = tools.bad.text_bytes()\nlat = tools.bad.latin1()\n"
        "raw = lambda b: getattr(b, 'data', b)\n"
        f"(raw(png) == bytes.fromhex({PNG.hex()!r}), raw(txt).decode(),"
        " raw(lat).decode('latin-1'))"
    )
    assert r.is_ok, r.error
    same, text, latin = r.value
    assert same is True
    assert "bob@example.org" not in text and TOKEN_RE.search(text)
    assert latin.startswith("Grüße an [EMAIL_") and "901820" not in latin
    assert any("binary data from bad.png" in w for w in r.warnings)


def test_binary_can_be_refused_instead() -> None:
    with pytest.raises(PrivacyBlocked, match="binary"):
        engine(binary="block").protect(Blob(PNG, "image/png"))


async def test_a_10_mb_result_is_tokenized_in_full(session: Session) -> None:
    r = await session.run(
        "rows = tools.bad.huge()\n"
        "(len(rows), sum('@' in r['email'] for r in rows), rows[-1]['email'][:7])"
    )
    assert r.is_ok, r.error
    assert r.value == [len(ROWS), 0, "[EMAIL_"]


def test_a_result_over_the_scan_limit_is_withheld_not_passed_unscanned() -> None:
    with pytest.raises(PrivacyBlocked, match="max_scan_mb"):
        engine(max_scan_mb=1).protect(ROWS)


async def test_deeply_nested_values_and_lone_surrogates_do_not_crash(session: Session) -> None:
    r = await session.run(
        "d = tools.bad.deep()\nn = 0\nwhile isinstance(d, list):\n    d = d[0]; n += 1\n(n, d)"
    )
    if r.is_ok:
        assert r.value[0] == 5_000 and TOKEN_RE.fullmatch(r.value[1])
    else:  # the bridge may refuse such depth; then it says so, and nothing leaks
        assert "alice@example.com" not in str(r)
    r = await session.run("tools.bad.surrogate()")
    assert "dave@example.com" not in str(r)


def test_the_walk_is_iterative_at_any_depth() -> None:
    deep: Any = {"email": "alice@example.com"}
    for _ in range(100_000):
        deep = {"k": deep}
    out, report = engine().protect(deep)
    assert report.found["EMAIL"] == 1
    for _ in range(100_000):
        out = out["k"]
    assert TOKEN_RE.fullmatch(out["email"])


def test_a_value_a_python_tool_still_holds_is_never_modified() -> None:
    mine = [{"email": "alice@example.com", "id": 1}, {"id": 2}]
    before = json.dumps(mine)
    out, _ = engine().protect(mine)
    assert json.dumps(mine) == before
    assert out[1] is mine[1]  # unchanged parts are shared, not copied
