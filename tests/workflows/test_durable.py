"""Durable runs: SIGKILL mid-run, then resume; side effects counted at the upstream server."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from procs import processes_with

from .conftest import Space

ENTITY = "{{name: {name}, entityType: test, observations: [x]}}"

WAITS = """
name: durable
inputs:
  flag: {{type: string}}
steps:
  - id: first
    tool: memory.create_entities
    args: {{entities: [{first}]}}
  - id: wait
    code: |
      import os, time
      {inside}
      deadline = time.monotonic() + 120
      while not os.path.exists(inputs["flag"]) and time.monotonic() < deadline:
          time.sleep(0.05)
    {idempotent}
  - id: second
    tool: memory.create_entities
    args: {{entities: [{second}]}}
"""


def workflow(inside: str = "", idempotent: str = "") -> str:
    return WAITS.format(
        first=ENTITY.format(name="first"),
        second=ENTITY.format(name="second"),
        inside=inside,
        idempotent=idempotent,
    )


def start(space: Space, path: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "CODEMODE_BASE": str(space.base), "CODEMODE_EXECUTOR": "subprocess"}
    return subprocess.Popen(
        [sys.executable, "-m", "codemode", "workflow", "run", path, "--no-interactive", *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip


def kill_when_started(
    space: Space, proc: subprocess.Popen[str], step: str, marker: Path | None = None
) -> str:
    """SIGKILL the run's whole process group once ``step`` has started (and ``marker``
    exists: the step's own sign that it is under way); its run id."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for run_id in space.run_ids():
            started = any(
                e.get("ev") == "start" and e.get("step") == step for e in space.journal(run_id)
            )
            if started and (marker is None or marker.exists()):
                time.sleep(0.3)  # well inside the step
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate(timeout=30)
                return run_id
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    raise AssertionError(f"step {step} never started")


def wait_gone(mark: str) -> None:
    """Wait until no process has ``mark`` on its command line.

    A killed runner takes its sandboxed processes with it, but not in the same instant:
    each process down the chain must be scheduled to die (bwrap, then the namespace's
    init, then the step), and on a busy machine a step that is already awake can still
    act in that gap. A test that touches the step's flag first measures that race.
    """
    deadline = time.monotonic() + 30
    while left := processes_with(mark):
        assert time.monotonic() < deadline, f"the killed run left processes behind: {left}"
        time.sleep(0.02)


def test_a_killed_run_resumes_without_repeating_a_finished_side_effect(
    space: Space,
) -> None:
    flag = space.base / "flag"
    path = space.write("w.yaml", workflow(idempotent="idempotent: true"))
    run_id = kill_when_started(space, start(space, str(path), "-i", f"flag={flag}"), "wait")
    assert space.entities() == ["first"]
    assert not any(e.get("ev") == "status" for e in space.journal(run_id))
    flag.touch()
    out = space.codemode("workflow", "resume", run_id, "--no-interactive")
    assert out.returncode == 0, out.stderr
    assert space.entities() == ["first", "second"]  # `first` was not created again
    starts = [e["step"] for e in space.journal(run_id) if e.get("ev") == "start"]
    assert starts.count("first") == 1 and starts.count("wait") == 2
    assert "↺ first" in out.stderr  # replayed from the journal


def test_an_unfinished_step_that_may_have_acted_is_not_rerun_without_a_decision(
    space: Space,
) -> None:
    flag = space.base / "flag"
    acted = space.base / "acted"  # the step's sign that its side effect is done
    inside = (
        "tools.memory.create_entities(entities=[{'name': 'inside', 'entityType': 'test', "
        f"'observations': ['x']}}]); open({str(acted)!r}, 'w').close()"
    )
    path = space.write("w.yaml", workflow(inside=inside))
    proc = start(space, str(path), "-i", f"flag={flag}")
    run_id = kill_when_started(space, proc, "wait", marker=acted)
    flag.touch()
    stuck = space.codemode("workflow", "resume", run_id, "--no-interactive", "--json")
    assert stuck.returncode == 3, stuck.stderr
    data = json.loads(stuck.stdout)
    assert (data["status"], data["step"]) == ("needs_decision", "wait")
    assert "--rerun wait" in data["error"] and "--skip wait" in data["error"]
    assert space.entities() == ["first", "inside"]
    done = space.codemode("workflow", "resume", run_id, "--skip", "wait", "--no-interactive")
    assert done.returncode == 0, done.stderr
    assert space.entities() == ["first", "inside", "second"]  # each exactly once
    listed = space.codemode("workflow", "list")
    assert f"{run_id}  durable  succeeded" in listed.stdout


TOOLS = """
name: slow
tools:
  - name: mark
    description: Append a line to a log in the workspace, after waiting for a flag.
    command:
      - python3
      - -c
      - |
        # run TOKEN
        import os, sys, time
        open("started", "w").close()
        deadline = time.monotonic() + 120
        while not os.path.exists("flag") and time.monotonic() < deadline:
            time.sleep(0.05)
        with open("log.txt", "a") as fh:
            fh.write(sys.argv[1] + "\\n")
      - "{idempotency_key}"
    parameters:
      idempotency_key: {type: string, default: none}
    annotations: {idempotent: IDEMPOTENT}
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")
@pytest.mark.parametrize("mode", ["annotation", "key"])
def test_an_idempotent_tool_step_is_rerun_on_resume(space: Space, mode: str) -> None:
    annotated = mode == "annotation"
    tools = TOOLS.replace("IDEMPOTENT", str(annotated).lower())
    space.write("tools/slow.yaml", tools.replace("TOKEN", str(space.base)))
    step = "  - id: mark\n    tool: slow.mark\n"
    if not annotated:
        step += "    idempotency_key: true\n"
    path = space.write("w.yaml", "name: marks\nsteps:\n" + step)
    files = space.base / "files"
    run_id = kill_when_started(space, start(space, str(path)), "mark", files / "started")
    wait_gone(f"# run {space.base}\n")
    (files / "flag").touch()
    out = space.codemode("workflow", "resume", run_id, "--no-interactive")
    assert out.returncode == 0, out.stderr + out.stdout
    lines = (files / "log.txt").read_text().splitlines()
    expected = "none" if annotated else f"{run_id}:mark"
    assert lines == [expected]  # the killed attempt never wrote; the re-run did, once


CLEANUP = """
name: cleanup
steps:
  - id: make
    tool: memory.create_entities
    args: {entities: [{name: tmp, entityType: test, observations: [x]}]}
  - id: drop
    tool: memory.delete_entities      # the server says idempotentHint: true
    args: {entityNames: [tmp]}
"""


def cut_after_start(space: Space, run_id: str, step: str) -> None:
    """The journal as a SIGKILL during ``step`` leaves it: nothing after its start."""
    path = space.base / "workflows" / "runs" / f"{run_id}.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    events = [json.loads(line) for line in lines]
    at = next(i for i, e in enumerate(events) if e.get("ev") == "start" and e["step"] == step)
    path.write_text("".join(lines[: at + 1]))


@pytest.mark.parametrize("trusted", [True, False])
def test_a_servers_idempotent_hint_counts_only_when_the_server_is_trusted(
    space: Space, trusted: bool
) -> None:
    if trusted:
        config = {"executor": "subprocess", "workflows": {"trusted_servers": ["memory"]}}
        (space.base / "config.json").write_text(json.dumps(config))
    path = space.write("w.yaml", CLEANUP)
    first = space.codemode("workflow", "run", str(path), "--json", "--no-interactive")
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout)["run_id"]
    cut_after_start(space, run_id, "drop")
    again = space.codemode("workflow", "resume", run_id, "--json", "--no-interactive")
    status = json.loads(again.stdout)["status"]
    assert status == ("succeeded" if trusted else "needs_decision"), again.stderr
    starts = [e["step"] for e in space.journal(run_id) if e.get("ev") == "start"]
    assert starts.count("make") == 1  # finished: never again
    assert starts.count("drop") == (2 if trusted else 1)
