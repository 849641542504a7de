"""A tenant's vault key (``load_key(..., tenant=...)``): its own, or another key derived
for it, never a key another tenant or a single workspace uses as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.privacy.config import VaultConfig
from codemode.privacy.keys import load_key, new_key


def test_a_key_file_two_tenants_name_gives_each_a_key_of_its_own(tmp_path: Path) -> None:
    shared = tmp_path / "shared.key"
    shared.write_text(new_key())
    shared.chmod(0o600)
    config = VaultConfig(key_file=shared)
    plain, _ = load_key(config, tmp_path / "ws")
    acme, where = load_key(config, tmp_path / "acme", {}, tenant="acme")
    globex, _ = load_key(config, tmp_path / "globex", {}, tenant="globex")
    assert plain == shared.read_text().strip().encode()  # a single workspace: unchanged
    assert len({plain, acme, globex}) == 3
    assert "derived for tenant acme" in where


def test_a_tenants_own_key_is_used_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEMODE_PRIVACY_KEY", new_key())
    own = new_key()
    key, where = load_key(VaultConfig(), tmp_path, {"CODEMODE_PRIVACY_KEY": own}, tenant="acme")
    assert key == own.encode() and "acme's env_file" in where
