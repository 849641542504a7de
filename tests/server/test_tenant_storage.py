"""Tenants served by one process never share where their skills and state live."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codemode.errors import ConfigError
from codemode.tenants.config import load_tenants
from codemode.tenants.serve import check_storage_apart


def _tenants_file(tmp_path: Path, tenants: dict[str, Any]) -> Path:
    path = tmp_path / "tenants.json"
    path.write_text(json.dumps({"tenants": tenants}))
    return path


def test_tenants_sharing_a_redis_prefix_are_refused(tmp_path: Path) -> None:
    tenants: dict[str, Any] = {}
    for name, config in [
        ("a", {"storage": "redis"}),  # the default prefix...
        ("b", {"storage": "redis", "redis_url": "redis://localhost:6379/0"}),  # ...spelled apart
        ("c", {"storage": "redis", "redis_prefix": "c"}),
        ("d", {}),
    ]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config))
        tenants[name] = {"workspace": str(tmp_path / name), "token_env": f"{name.upper()}_TOKEN"}
    env = {f"{n.upper()}_TOKEN": f"token-of-{n}-" + "x" * 32 for n in tenants}
    with pytest.raises(ConfigError, match="tenants 'a' and 'b' keep their skills"):
        check_storage_apart(load_tenants(_tenants_file(tmp_path, tenants), env=env))
    (tmp_path / "b" / "config.json").write_text(
        json.dumps({"storage": "redis", "redis_prefix": "b"})
    )
    check_storage_apart(load_tenants(_tenants_file(tmp_path, tenants), env=env))
    (tmp_path / "d" / "config.json").write_text(
        json.dumps({"storage": "redis", "redis_prefix": "c:skills"})
    )
    with pytest.raises(ConfigError, match="'c' and 'd'"):
        check_storage_apart(load_tenants(_tenants_file(tmp_path, tenants), env=env))
