"""``codemode state get|set|list|delete`` from the shell, on the state the code sees.

The real CLI in a subprocess, as a user types it; the code of a ``codemode run`` in the
same workspace reads and writes the same document.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "codemode"]


def state(*args: str, base: Path, stdin: str = "") -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMODE_")}
    done = subprocess.run(
        [*CLI, *args, "--base", str(base)],
        capture_output=True,
        text=True,
        timeout=180,
        input=stdin,
        env=env,
    )
    return done.returncode, done.stdout, done.stderr


def test_state_set_get_list_delete_round_trip_with_the_code_of_a_run(tmp_path: Path) -> None:
    base = tmp_path / "ws"
    assert state("state", "set", "cursor", "42", base=base) == (0, "set cursor\n", "")
    assert state("state", "set", "note", "hi there", "--string", base=base)[0] == 0
    assert state("state", "set", "seen", "-", base=base, stdin='{"a": [1, 2]}\n')[0] == 0
    assert state("state", "get", "cursor", base=base) == (0, "42\n", "")
    code, out, _ = state("state", "get", base=base)
    everything = {"cursor": 42, "note": "hi there", "seen": {"a": [1, 2]}}
    assert code == 0 and json.loads(out) == everything
    code, out, _ = state("state", "list", base=base)
    assert code == 0 and out.splitlines() == [
        "cursor  42",
        'note    "hi there"',
        'seen    {"a": [1, 2]}',
    ]
    code, out, _ = state("state", "list", "--json", base=base)
    assert code == 0 and json.loads(out)["seen"] == {"a": [1, 2]}

    code, out, err = state(
        "run", "--executor", "subprocess", "-c",
        "state.set('cursor', state.get('cursor') + 1)\nstate.get('note')",
        base=base,
    )  # fmt: skip
    assert (code, out) == (0, "'hi there'\n"), err
    assert state("state", "get", "cursor", base=base) == (0, "43\n", "")

    assert state("state", "delete", "cursor", base=base) == (0, "deleted cursor\n", "")
    assert state("state", "rm", "note", base=base) == (0, "deleted note\n", "")
    code, out, _ = state("state", "get", base=base)
    assert json.loads(out) == {"seen": {"a": [1, 2]}}


def test_a_missing_key_suggests_the_closest_or_lists_the_keys(tmp_path: Path) -> None:
    base = tmp_path / "ws"
    state("state", "set", "cursor", "1", base=base)
    assert state("state", "get", "cursr", base=base) == (
        1,
        "",
        "Error: the state has no key 'cursr' (did you mean 'cursor'?)\n",
    )
    assert state("state", "delete", "zzz", base=base) == (
        1,
        "",
        "Error: the state has no key 'zzz' (its keys: cursor)\n",
    )
    state("state", "delete", "cursor", base=base)
    assert state("state", "get", "cursor", base=base)[2] == (
        "Error: the state has no key 'cursor' (the state is empty)\n"
    )


def test_a_value_that_is_not_json_is_a_usage_error_that_says_how_to_store_text(
    tmp_path: Path,
) -> None:
    base = tmp_path / "ws"
    code, _, err = state("state", "set", "who", "ada", base=base)
    assert code == 2
    assert err.splitlines()[-1] == (
        "Error: Invalid value for VALUE: 'ada' is not JSON. To store it as text, add --string; "
        "a JSON string is quoted: '\"ada\"'"
    )
    code, _, err = state("state", "set", "who", '{"a": 1,}', base=base)
    assert code == 2 and "is not JSON (Expecting property name" in err
    assert state("state", "get", base=base)[1] == "{}\n"
