"""Deps: specs are checked, pip runs into the workspace's directory, failures carry pip's words."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codemode.errors import DepsError
from codemode.memory.deps import Deps, check_spec
from codemode.memory.deps.pip import canonical_spec

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("spec", "rendered"),
    [
        ("six", "six"),
        ("six==1.17.0", "six==1.17.0"),
        ("tomli>=2,<3", "tomli<3,>=2"),
        ("Pkg_Name[Extra.One]~=1.4", "pkg-name[extra-one]~=1.4"),
        ("zope.interface == 6.0", "zope-interface==6.0"),
    ],
)
def test_plain_requirements_are_accepted_and_rendered_canonically(spec: str, rendered: str) -> None:
    assert canonical_spec(spec) == rendered
    assert check_spec(spec).name == rendered.split("[")[0].split("=")[0].split("<")[0].split("~")[0]


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("--index-url=http://evil/simple six", "options"),
        ("-r requirements.txt", "options"),
        ("six --index-url http://evil", "not a valid requirement"),
        ("six @ https://example.com/six.whl", "URL"),
        ("six @ file:///workspace/six.whl", "URL"),
        ("pkg; python_version>'3'", "markers"),
        ("six===1.0", "operator"),
        ("", "non-empty"),
        ("six\n--pre", "options"),
    ],
)
def test_options_urls_and_garbage_are_refused(spec: str, why: str) -> None:
    with pytest.raises(DepsError, match=why):
        check_spec(spec)


def import_from(site: Path, module: str) -> subprocess.CompletedProcess[str]:
    code = (
        f"import sys; sys.path.insert(0, {str(site)!r}); import {module}; print({module}.__file__)"
    )
    return subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60
    )


async def test_add_installs_into_the_deps_directory_and_remove_deletes_it(tmp_path: Path) -> None:
    deps = Deps(tmp_path / "deps")
    info = await deps.add("tomli==2.0.1")
    assert (info["name"], info["version"]) == ("tomli", "2.0.1")
    found = import_from(deps.site, "tomli")
    assert found.stdout.startswith(str(deps.site))
    assert await deps.list() == [{"name": "tomli", "spec": "tomli==2.0.1", "version": "2.0.1"}]
    assert await deps.remove("tomli") is True
    assert await deps.list() == []
    assert not list(deps.site.glob("tomli*"))


async def test_adding_a_new_version_replaces_the_old_one(tmp_path: Path) -> None:
    deps = Deps(tmp_path / "deps")
    await deps.add("tomli==2.0.1")
    await deps.add("tomli==2.0.2")
    assert [d["version"] for d in await deps.list()] == ["2.0.2"]


async def test_a_failed_install_raises_with_pips_message_and_records_nothing(
    tmp_path: Path,
) -> None:
    deps = Deps(tmp_path / "deps")
    with pytest.raises(DepsError, match="No matching distribution"):
        await deps.add("codemode-no-such-package-xyz==9.9")
    assert await deps.list() == []


async def test_runtime_changes_can_be_turned_off(tmp_path: Path) -> None:
    deps = Deps(tmp_path / "deps", allow_runtime_deps=False)
    with pytest.raises(DepsError, match="turned off"):
        await deps.add("six")
    with pytest.raises(DepsError, match="turned off"):
        await deps.remove("six")


async def test_sync_rebuilds_from_the_manifest_and_configured_specs(tmp_path: Path) -> None:
    deps = Deps(tmp_path / "deps", configured=["six"])
    await deps.add("tomli==2.0.1")
    (deps.site / "stray.py").write_text("x = 1")
    result = await deps.sync()
    assert result["installed"] == ["tomli==2.0.1", "six"]
    assert sorted(d["name"] for d in await deps.list()) == ["six", "tomli"]
    assert not (deps.site / "stray.py").exists()


@pytest.mark.parametrize(
    "entry", ["--index-url=http://evil/simple", "six @ file:///tmp/six.whl", "-e .", 7]
)
async def test_sync_refuses_a_manifest_entry_that_is_not_a_plain_requirement(
    tmp_path: Path, entry: object
) -> None:
    deps = Deps(tmp_path / "deps")
    (deps.root / ".requirements.json").write_text(json.dumps({"requirements": ["six", entry]}))
    with pytest.raises(DepsError, match=r"requirements\.json"):
        await deps.sync()
    with pytest.raises(DepsError, match=r"requirements\.json"):
        await deps.list()
    assert sorted(p.name for p in deps.site.iterdir()) == [".lock", ".requirements.json"]


async def test_configured_deps_are_installed_when_missing(tmp_path: Path) -> None:
    deps = Deps(tmp_path / "deps", allow_runtime_deps=False, configured=["six"])
    assert await deps.install_configured() == ["six"]
    assert await deps.install_configured() == []
    assert import_from(deps.site, "six").returncode == 0


async def test_an_install_past_the_deps_quota_is_stopped_and_installs_nothing(
    tmp_path: Path,
) -> None:
    """One tenant's agent adding package after package filled the disk every workspace is
    on. pip is stopped once what it wrote passes what the quota leaves."""
    deps = Deps(tmp_path / "deps", max_bytes=400_000)  # tomli: ~75 KB, packaging: ~490 KB
    await deps.add("tomli==2.0.1")
    with pytest.raises(DepsError, match="deps quota"):
        await deps.add("packaging==24.2")
    assert [d["name"] for d in await deps.list()] == ["tomli"]
    assert not list(deps.site.glob("packaging*"))
    assert not [p for p in deps.root.iterdir() if p.name.startswith((".pip-", ".add-"))]


async def test_the_deps_quota_comes_from_the_workspace_config(tmp_path: Path) -> None:
    from codemode.memory import Memory

    (tmp_path / "config.json").write_text(json.dumps({"memory": {"deps_quota_mb": 3}}))
    memory = Memory.from_workspace(tmp_path)
    assert memory.deps is not None and memory.deps.max_bytes == 3 << 20
