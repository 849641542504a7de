"""The cheap scan agrees with a parse of the whole cell: words in strings, comments and
f-strings, statements split by ``;``, statements over several lines, decorators, aliases
bound anywhere in the cell, and every module of the standard library as a cell."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codemode.checks import Checker, CodeChecksConfig

CHECKER = Checker(CodeChecksConfig())


def found(code: str) -> list[str]:
    return [str(f) for f in Checker(CodeChecksConfig()).scan(code)]


def whole(code: str) -> set[tuple[int, str, str]]:
    """What a walk of the whole parsed cell finds (the reference)."""
    return {(f.lineno, f.rule, f.name) for f in CHECKER._scan_whole(code, None)}


def fast(code: str) -> set[tuple[int, str, str]]:
    return {(f.lineno, f.rule, f.name) for f in Checker(CodeChecksConfig()).scan(code)}


CELLS = {
    "triple-quoted string over lines": 's = """\nimport subprocess\nos.system(1)\n"""\nx = 1\n',
    "raw string with an escaped quote": "p = r'\\' os.system(\"x\")'\nq = 'eval'\n",
    "comment with quotes": "# it's eval(\"x\")\nprint(1)  # os.system('y')\n",
    "code in an f-string": "name = 'x'\nprint(f\"{eval(name)} and eval\")\n",
    "statements split by semicolons": "a = 1; import os as o; b = 2; o.system('x')\n",
    "a semicolon in a string": "s = 'a; eval(1)'; t = 2\n",
    "a multi-line call": "import os\nrun = os.system(\n    'ls'\n)\n",
    "unindented lines inside brackets": "cmds = [\n'ls',\nos.system('x'),\n]\n",
    "a decorator": "import os\n@deco\ndef f():\n    os.system('x')\nf()\n",
    "if, else and try clauses": (
        "if x:\n    eval('1')\nelse:\n    exec('2')\n"
        "try:\n    import socket\nexcept ImportError:\n    pass\n"
    ),
    "an alias bound after its use and inside a function": (
        "def f():\n    run('x')\n\ndef g():\n    from os import system as run\n"
    ),
    "a parenthesised import over lines": "from os import (\n    system as go,\n)\ngo('x')\n",
    "a backslash continuation": "import os\nx = 1 + \\\n0\nos.system('x')\n",
    "plain imports with spaces and several names": (
        "import os . path as p, subprocess\nfrom os import system as s, popen  # eval\ns('x')\n"
    ),
    "getattr with a forbidden attribute in a string": "g = getattr(f, '__globals__')\n",
    "dunder words as names": "b = __builtins__\nk = x.__class__.__bases__\n",
    "words inside longer names": "retrieval = 1\nexecute = 2\nmy_eval_x = 3\nos.execv('a', [])\n",
}


@pytest.mark.parametrize("code", list(CELLS.values()), ids=list(CELLS))
def test_the_cheap_scan_finds_what_a_walk_of_the_whole_cell_finds(code: str) -> None:
    assert fast(code) == whole(code)


def test_words_only_in_strings_and_comments_are_not_findings() -> None:
    assert found(CELLS["triple-quoted string over lines"]) == []
    assert found(CELLS["comment with quotes"]) == []
    assert found(CELLS["a semicolon in a string"]) == []


def test_a_renamed_call_is_found_wherever_its_import_is() -> None:
    assert found(CELLS["an alias bound after its use and inside a function"]) == [
        "line 2: calls 'os.system' (a forbidden call)"
    ]
    assert found(CELLS["a parenthesised import over lines"]) == [
        "line 4: calls 'os.system' (a forbidden call)"
    ]


def test_a_cell_of_plain_imports_is_read_with_every_name() -> None:
    assert found(CELLS["plain imports with spaces and several names"]) == [
        "line 1: imports 'subprocess' (a forbidden import)",
        "line 3: calls 'os.system' (a forbidden call)",
    ]


def test_a_cell_scanned_again_gives_the_same_findings() -> None:
    checker = Checker(CodeChecksConfig())
    code = "import os\nos.system('x')\n"
    assert checker.scan(code) == checker.scan(code) == checker._scan(code)


def test_every_module_of_the_standard_library_scans_as_its_whole_parse_does() -> None:
    stdlib = Path(os.__file__).parent
    files = sorted(stdlib.glob("*.py"))
    assert len(files) > 100
    for file in files:
        code = file.read_text(encoding="utf-8", errors="replace")
        assert fast(code) == whole(code), file.name
