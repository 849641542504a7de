"""Which servers are sinks: one given a path inside the workspace, however its arguments
or environment spell it, receives tokens, never real values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemode.config.servers import StdioServerConfig
from codemode.privacy.sinks import touches_workspace


def _spellings(files: Path) -> list[tuple[list[str], dict[str, str]]]:
    f = str(files)
    return [
        ([f], {}),
        ([f"--root={f}"], {}),
        (["--dirs", f"/tmp,{f}"], {}),
        (["--dirs", f"/tmp;{f}"], {}),
        ([json.dumps({"roots": ["/tmp", f]})], {}),
        ([f"file://{f}"], {}),
        ([], {"ALLOWED_DIRECTORIES": f"/tmp,{f},/srv"}),
        ([], {"ROOTS": json.dumps(["/tmp", f])}),
        ([], {"DATA_PATH": f"/tmp:{f}"}),
        ([f"--roots=('/tmp', '{f}')"], {}),
    ]


@pytest.mark.parametrize("index", range(10))
def test_a_server_given_the_workspace_in_any_list_spelling_touches_it(
    tmp_path: Path, index: int
) -> None:
    ws = tmp_path / "ws"
    files = ws / "files"
    files.mkdir(parents=True)
    args, env = _spellings(files)[index]
    server = StdioServerConfig(command="node", args=tuple(args), env=env)
    assert touches_workspace(server, ws), (args, env)


def test_a_server_given_only_other_paths_does_not_touch_it(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "files").mkdir(parents=True)
    other = tmp_path / "other"
    server = StdioServerConfig(
        command="node",
        args=(f"--dirs=/srv,{other}", json.dumps([str(other)])),
        env={"DATA": f"{other}:{other}/x", "NAME": "files"},
    )
    assert not touches_workspace(server, ws)
