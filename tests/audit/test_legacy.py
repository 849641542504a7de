"""A tenant's log signed with the server's key before tenants had their own keeps that key
(``load_keys(..., log=...)``), wherever its last signed line is; any other log gets its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.audit.config import AuditConfig
from codemode.audit.keys import Keys, load_keys
from codemode.audit.log import AuditLog
from codemode.audit.verify import verify

SERVER = "server-audit-key-" + "s" * 32


@pytest.fixture(autouse=True)
def server_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEMODE_AUDIT_KEY", SERVER)


def _write(path: Path, keys: Keys, *sizes: int, max_bytes: int = 1 << 20) -> Path:
    head = path.parent / "head"
    log = AuditLog(path, keys, head=head, max_bytes=max_bytes)
    for size in sizes:
        log.append({"kind": "run", "code": "x" * size})
    log.close()
    return head


def _keys(path: Path, env: dict[str, str] | None = None) -> Keys:
    return load_keys(AuditConfig(enabled=True), env or {}, tenant="acme", log=path)


def test_a_log_rotated_just_now_keeps_the_servers_key(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    head = _write(path, Keys.derive(SERVER.encode(), ""), 10, 10, max_bytes=100)
    assert path.stat().st_size == 0  # the active file is empty: its last line is rotated
    keys = _keys(path)
    assert "as it is, instead of its own key" in keys.source
    assert verify(path, head, keys).ok


def test_a_last_line_longer_than_the_read_is_found(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    head = _write(path, Keys.derive(SERVER.encode(), ""), 10, 300_000)
    assert verify(path, head, _keys(path)).ok


def test_a_new_log_and_a_log_of_its_own_key_get_its_key(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    assert "derived for tenant acme" in _keys(path).source  # nothing written yet
    own = "acme-audit-key-" + "a" * 32
    _write(path, Keys.derive(own.encode(), ""), 10)
    keys = _keys(path, {"CODEMODE_AUDIT_KEY": own})
    assert keys.source == "$CODEMODE_AUDIT_KEY of tenant acme's env_file"


def test_a_cut_last_line_does_not_hide_the_key_of_the_one_before(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, Keys.derive(SERVER.encode(), ""), 10)
    with path.open("ab") as f:
        f.write(b'{"kind":"run","seq":2')  # a crash in the middle of a write
    assert "as it is, instead of its own key" in _keys(path).source
