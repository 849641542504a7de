"""Which servers are sinks: one given a path inside the workspace, however its arguments
or environment spell it, receives tokens, never real values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemode import Session, SubprocessExecutor
from codemode.config.servers import StdioServerConfig
from codemode.privacy.sinks import touches_workspace
from codemode.privacy.tokens import TOKEN_RE
from codemode.workspace import Workspace

from .conftest import REAL_VALUES, PrivateWorkspace


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


COMMAND_TOOLS = """
name: notes
description: Files in the workspace.
tools:
  - name: touch
    description: Create an empty file.
    command: [touch, "{name}"]
    parameters:
      name: {type: string}
  - name: save
    description: Write a text to a file.
    command: [tee, "{name}"]
    stdin: "{text}"
    parameters:
      name: {type: string}
      text: {type: string}
"""


@pytest.mark.anyio
@pytest.mark.parametrize("host", [False, True])
async def test_a_command_tool_works_in_the_workspace_so_it_gets_tokens(
    private_ws: PrivateWorkspace, host: bool
) -> None:
    """Its working directory is the workspace's ``files/``, the sandbox's ``/workspace``:
    a real value it wrote there (as a file's name or content) would be read back by the
    code, which could show it to the model in a form no detector knows (reversed)."""
    (private_ws.base / "tools").mkdir()
    text = (
        COMMAND_TOOLS.replace("    command:", "    host: true\n    command:")
        if host
        else COMMAND_TOOLS
    )
    (private_ws.base / "tools" / "notes.yaml").write_text(text)
    code = (
        f"import os\nos.chdir({str(private_ws.files)!r})\n"
        "c = tools.crm.list_customers()[0]\n"
        "tools.notes.touch(name=c['email'])\n"
        "tools.notes.save(name='card.txt', text=c['card'])\n"
        "names = sorted(os.listdir('.'))\n"
        "print([n[::-1] for n in names], open('card.txt').read()[::-1])\n"
    )
    workspace = Workspace.open(private_ws.base)
    async with Session.for_workspace(
        workspace, executor=SubprocessExecutor(memory_limit_mb=1024)
    ) as s:
        r = await s.run(code)
    assert r.is_ok, r.error
    on_disk = " ".join(p.name + " " + p.read_text() for p in private_ws.files.iterdir())
    reversed_values = [v[::-1] for v in REAL_VALUES]
    assert [v for v in REAL_VALUES if v in on_disk] == [], on_disk
    assert [v for v in reversed_values if v in r.stdout] == [], r.stdout
    assert len(TOKEN_RE.findall(on_disk)) == 2, on_disk
