"""Code checks before a run: forbidden imports, calls and attributes are reported in the
result's warnings (the default) or refuse the run; the sandbox stays the boundary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codemode import Session, SubprocessExecutor
from codemode.checks import Checker, CodeChecksConfig
from codemode.workspace import Workspace

pytestmark = pytest.mark.anyio


def findings(code: str, **config: Any) -> list[str]:
    return [str(f) for f in Checker(CodeChecksConfig(**config)).scan(code)]


def session(tmp_path: Path, config: dict[str, Any]) -> Session:
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "mcp.json").write_text('{"mcpServers": {}}')
    return Session.for_workspace(Workspace.open(tmp_path), executor=SubprocessExecutor())


async def test_by_default_a_finding_is_a_warning_and_the_code_runs(tmp_path: Path) -> None:
    async with session(tmp_path, {}) as s:
        result = await s.run("import subprocess\nx = 41\nx + 1")
    assert result.value == 42
    assert result.warnings[0] == (
        "code check: line 1: imports 'subprocess' (a forbidden import) "
        "(code_checks.mode is 'warn', so the code ran)"
    )


async def test_reject_mode_refuses_to_run_the_code_and_lists_every_finding(
    tmp_path: Path,
) -> None:
    async with session(tmp_path, {"code_checks": {"mode": "reject"}}) as s:
        refused = await s.run("marker = 1\nimport ctypes\neval('1')")
        after = await s.run("'marker' in globals()")
    assert refused.error is not None and refused.error.type == "CodeRejected"
    assert refused.error.lineno == 2
    assert "line 2: imports 'ctypes'" in refused.error.message
    assert "line 3: calls 'eval'" in refused.error.message
    assert after.value is False  # nothing of the rejected cell ran


async def test_mode_off_checks_nothing(tmp_path: Path) -> None:
    async with session(tmp_path, {"code_checks": {"mode": "off"}}) as s:
        result = await s.run("import subprocess")
    assert result.warnings == ()


def test_calls_are_resolved_through_the_cells_import_aliases() -> None:
    code = "import os as o\nfrom os import system as run\no.system('x')\nrun('y')\no.execv('a', [])"
    assert findings(code) == [
        "line 3: calls 'os.system' (a forbidden call)",
        "line 4: calls 'os.system' (a forbidden call)",
        "line 5: calls 'os.execv' (a forbidden call)",
    ]


def test_classic_escapes_through_dunder_attributes_are_found() -> None:
    code = (
        "k = ().__class__.__bases__[0].__subclasses__()\n"
        "g = getattr(f, '__globals__')\n"
        "b = __builtins__\n"
        "m = __import__('socket')"
    )
    got = findings(code)
    assert "line 1: uses the attribute '__bases__' (a forbidden attribute)" in got
    assert "line 1: uses the attribute '__subclasses__' (a forbidden attribute)" in got
    assert "line 2: uses the attribute '__globals__' (a forbidden attribute)" in got
    assert "line 3: uses the attribute '__builtins__' (a forbidden attribute)" in got
    assert "line 4: imports 'socket' (a forbidden import)" in got


def test_submodules_and_from_imports_of_a_forbidden_module_are_found() -> None:
    got = findings("import multiprocessing.pool\nfrom subprocess import run\nimport os.path")
    assert got == [
        "line 1: imports 'multiprocessing.pool' (a forbidden import)",
        "line 2: imports 'subprocess' (a forbidden import)",
        "line 2: imports 'subprocess.run' (a forbidden import)",
    ]


def test_words_in_comments_and_strings_are_not_findings() -> None:
    code = "# we never import subprocess here\nprint('eval is evil; os.system too')\nx = 1"
    assert findings(code) == []


def test_cells_with_top_level_await_are_checked_and_broken_statements_are_left_to_the_worker() -> (
    None
):
    assert findings("import asyncio\nawait asyncio.sleep(0)\nexec('x')") == [
        "line 3: calls 'exec' (a forbidden call)"
    ]
    assert findings("def broken(:\n    os.system('x')") == []
    # Only the statements holding a rule's words are parsed: a syntax error elsewhere does
    # not hide a finding (the worker still reports it when the code runs).
    assert findings("import subprocess\ndef broken(:") == [
        "line 1: imports 'subprocess' (a forbidden import)"
    ]


def test_configured_lists_replace_the_defaults() -> None:
    config = {"forbidden_imports": ["json"], "forbidden_calls": ["print"]}
    assert findings("import json\nimport subprocess\nprint(1)", **config) == [
        "line 1: imports 'json' (a forbidden import)",
        "line 3: calls 'print' (a forbidden call)",
    ]
