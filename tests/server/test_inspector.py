"""The MCP Inspector CLI (a client that is not ours) talks to ``codemode serve``.

Two generations: 0.15 on the machine's Node 20, and 2.x on Node 22 (which 2.x needs);
``.ci/install-test-servers.sh`` installs both, Node 22 from the npm registry's ``node``
package into ``.ci/node22``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import INSTALL_HINT, NODE_DIR, REPO, serve_argv

NODE22_DIR = REPO / ".ci" / "node22"


@dataclass(frozen=True)
class Inspector:
    label: str
    folder: Path
    node_bin: Path | None  # a Node to put first on PATH (None: the machine's)
    extra: tuple[str, ...] = ()

    @property
    def binary(self) -> Path:
        return self.folder / "node_modules" / ".bin" / "mcp-inspector"

    def run(self, base: Path, *method: str) -> subprocess.CompletedProcess[str]:
        if not self.binary.exists():
            pytest.skip(f"the MCP Inspector CLI {self.label} is missing: {INSTALL_HINT}")
        env = dict(os.environ)
        if self.node_bin is not None:
            env["PATH"] = f"{self.node_bin}:{env.get('PATH', '')}"
        elif shutil.which("node") is None:
            pytest.skip(f"node is missing: {INSTALL_HINT}")
        server = serve_argv(base, "--executor", "subprocess")
        argv = [str(self.binary), "--cli", *self.extra, *server, *method]
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=240, cwd=self.folder, env=env
        )


INSPECTORS = [
    Inspector("0.15", NODE_DIR, None),
    # 2.x waits 15 s for a server by default; a loaded CI machine may need longer.
    Inspector(
        "2.x", NODE22_DIR, NODE22_DIR / "node_modules" / ".bin", ("--connect-timeout", "120000")
    ),
]


@pytest.fixture(params=INSPECTORS, ids=[i.label for i in INSPECTORS])
def inspector(request: pytest.FixtureRequest) -> Inspector:
    found: Inspector = request.param
    return found


def answer(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert done.returncode == 0, done.stderr[-2000:]
    data: dict[str, object] = json.loads(done.stdout)
    return data


def test_the_inspector_lists_codemode_tools(inspector: Inspector, tmp_path: Path) -> None:
    listed = answer(inspector.run(tmp_path / "ws", "--method", "tools/list"))
    names = {t["name"] for t in listed["tools"]}  # type: ignore[attr-defined,index]
    assert {"run_code", "search_tools", "get_tool", "reset_session", "save_artifact"} <= names


def test_the_inspector_runs_code(inspector: Inspector, tmp_path: Path) -> None:
    call = ("--method", "tools/call", "--tool-name", "run_code", "--tool-arg", "code=print(6*7)")
    called = answer(inspector.run(tmp_path / "ws", *call))
    assert called["isError"] is False
    assert called["content"] == [{"type": "text", "text": "42"}]


def test_inspector_2_finds_no_schema_portability_problem(tmp_path: Path) -> None:
    done = INSPECTORS[1].run(tmp_path / "ws", "--strict", "--method", "tools/list")
    answer(done)  # exit 6 would mean an error-severity problem
    assert done.stderr == ""  # not even a warning (save_artifact.data once had no type)


def test_inspector_2_saves_a_json_artifact_through_the_typed_data_field(tmp_path: Path) -> None:
    call = ("--method", "tools/call", "--tool-name", "save_artifact", "--tool-arg", "name=a")
    data = ("--tool-arg", 'data={"x": [1, 2]}')
    saved = answer(INSPECTORS[1].run(tmp_path / "ws", *call, *data))
    assert saved["isError"] is False
    assert saved["structuredContent"]["type"] == "json"  # type: ignore[index]
