"""Every code block in README.md and docs/*.md runs (or parses) as written.

A fence must name its language. What a block needs is marked by an HTML comment on the
line before its fence; unmarked blocks run as they are:

- ``python``: run as a script (``python -c``), in a fresh directory;
- ``json`` / ``yaml``: parsed (JSON may carry ``//`` comments, as codemode's files do);
- ``bash`` / ``sh``: run with ``bash``;
- ``text``: diagrams and usage lines, nothing to run;
- ``<!-- doctest: agent -->``: code the agent writes: run in a session whose tools are
  small stand-ins for the servers the text names (``sheets``, ``crm``, ``files``, ``time``);
- ``<!-- doctest: client -->`` (needs an MCP client application, a running server or an
  LLM provider's key) and
  ``<!-- doctest: terminal -->`` (a long-running or machine-wide command): checked for
  syntax only (``bash -n``, ``compile``, JSON parsing).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from codemode import Session, Workspace
from codemode.config import strip_json_comments
from codemode.execution import executor_by_name

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- doctest: (agent|client|terminal) -->$")
LANGUAGES = {"python", "json", "yaml", "bash", "sh", "text"}


@dataclass(frozen=True)
class Block:
    file: Path
    line: int
    lang: str
    mark: str | None
    code: str

    @property
    def id(self) -> str:
        return f"{self.file.name}:{self.line}:{self.lang}" + (f":{self.mark}" if self.mark else "")


def blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            lang = lines[i][3:].strip()
            mark = MARKER.match(lines[i - 1]) if i else None
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            code = "\n".join(lines[i + 1 : end]) + "\n"
            out.append(Block(path, i + 1, lang, mark.group(1) if mark else None, code))
            i = end
        elif lines[i].startswith("<!-- doctest") and not lines[i + 1].startswith("```"):
            raise AssertionError(f"{path.name}:{i + 1}: a doctest marker must precede a fence")
        i += 1
    return out


ALL = [b for path in DOCS for b in blocks(path)]


def test_every_fence_names_a_language_the_test_knows() -> None:
    unknown = [b.id for b in ALL if b.lang not in LANGUAGES]
    assert not unknown, f"fences without a known language: {unknown}"
    assert len([b for b in ALL if b.lang == "python" and b.mark is None]) >= 4


def run_python(code: str, cwd: Path) -> None:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["CODEMODE_BASE"] = str(cwd / "base")
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, f"stdout:\n{out.stdout}\nstderr:\n{out.stderr}"


def syntax_only(block: Block) -> None:
    if block.lang == "python":
        compile(block.code, block.id, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    elif block.lang in ("bash", "sh"):
        subprocess.run(["bash", "-n"], input=block.code, text=True, check=True)
    elif block.lang == "json":
        json.loads(strip_json_comments(block.code))


def get_rows(sheet_id: str) -> list[dict[str, Any]]:
    """Rows of a sheet."""
    return [{"id": i, "amount": i * 1_000} for i in range(100)]


def attach_note(record_id: str, text: str) -> bool:
    """Attach a note to a CRM record."""
    return True


def read_text_file(path: str) -> str:
    """Read a text file."""
    return Path(path).read_text()


def get_current_time(timezone: str) -> dict[str, str]:
    """The current time in a timezone."""
    return {"timezone": timezone, "datetime": "2026-01-01T12:00:00"}


async def run_agent_code(code: str, base: Path) -> None:
    workspace = Workspace.open(base, env={})
    executor = executor_by_name("subprocess", workspace=workspace)
    async with Session.for_workspace(workspace, executor=executor) as session:
        session.register_tool(get_rows, server="sheets")
        session.register_tool(attach_note, server="crm")
        session.register_tool(read_text_file, server="files")
        session.register_tool(get_current_time, server="time")
        result = await session.run(code, timeout=180)
    assert result.is_ok, result.error.traceback if result.error else result


@pytest.mark.parametrize("block", ALL, ids=[b.id for b in ALL])
def test_the_block_works_as_written(block: Block, tmp_path: Path) -> None:
    if block.mark in ("client", "terminal") or block.lang == "text":
        syntax_only(block)
    elif block.mark == "agent":
        import anyio

        anyio.run(run_agent_code, block.code, tmp_path / "ws")
    elif block.lang == "python":
        run_python(block.code, tmp_path)
    elif block.lang == "json":
        json.loads(strip_json_comments(block.code))
    elif block.lang == "yaml":
        yaml.safe_load(block.code)
    else:
        subprocess.run(["bash", "-e"], input=block.code, text=True, check=True, cwd=tmp_path)
