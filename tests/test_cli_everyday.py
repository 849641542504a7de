"""The small things a newcomer meets first, driven as they would: the real command, its exit
status and the exact lines it prints."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import click

from codemode.server.cli import serve

CLI = [sys.executable, "-m", "codemode"]
REPO = Path(__file__).resolve().parents[1]
CUT_HINT = "--full prints everything, --out FILE writes it to a file"


def codemode(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, input=stdin)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return codemode("run", "--no-tools", "--executor", "subprocess", *args)


# ----------------------------------------------------------------------------- codemode run


def test_code_given_as_a_file_argument_gets_a_hint_at_dash_c() -> None:
    done = codemode("run", "print(1)")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-2:] == [
        "Error: no such file: 'print(1)'",
        "To run code given on the command line, use -c: codemode run -c 'print(1)'",
    ]


def test_a_missing_file_name_gets_no_dash_c_hint() -> None:
    done = codemode("run", "job.py")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == "Error: no such file: 'job.py'"


def test_run_json_prints_one_json_object_with_the_result() -> None:
    done = run("--json", "-c", "print('hi')\n6 * 7")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert {k: data[k] for k in ("ok", "stdout", "value", "has_value", "error", "truncated")} == {
        "ok": True,
        "stdout": "hi\n",
        "value": 42,
        "has_value": True,
        "error": None,
        "truncated": [],
    }


def test_run_json_reports_an_error_and_exits_1() -> None:
    done = run("--json", "-c", "1 / 0")
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert data["ok"] is False and data["error"]["type"] == "ZeroDivisionError"


def test_long_output_is_cut_as_a_model_would_see_it_and_the_cut_is_announced() -> None:
    done = run("-c", "print('x' * 100_000)")
    assert done.returncode == 0
    assert len(done.stdout) <= 20_001
    assert re.search(r"\[\.\.\. [\d,]+ of 100,001 characters truncated; " + CUT_HINT, done.stdout)
    assert done.stderr.splitlines() == [
        "codemode: output truncated to 20,000 characters (stdout: 100,001 in all); " + CUT_HINT
    ]


def test_full_prints_everything() -> None:
    done = run("--full", "-c", "print('x' * 2_500_000)")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout == "x" * 2_500_000 + "\n"  # more than the worker keeps by default


def test_out_writes_everything_to_a_file(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    done = run("--out", str(out), "-c", "print('y' * 300_000)\n'done'")
    assert done.returncode == 0
    assert done.stdout == ""
    assert done.stderr.splitlines() == [f"codemode: wrote 300,008 characters of output to {out}"]
    assert out.read_text() == "y" * 300_000 + "\n'done'\n"


# ----------------------------------------------------------------------------- skills


def test_adding_a_skill_that_exists_says_how_to_replace_it(tmp_path: Path) -> None:
    skill = tmp_path / "greet.py"
    skill.write_text('def run(who):\n    """Say hi."""\n    return "hi " + who\n')
    base = str(tmp_path / "ws")
    assert codemode("skills", "add", str(skill), "--base", base).returncode == 0
    again = codemode("skills", "add", str(skill), "--base", base)
    assert again.returncode == 1
    assert again.stderr.splitlines() == [
        "Error: a skill named 'greet' already exists (version 1); to save this as its next "
        "version pass replace=True (codemode skills add --replace), or choose another name"
    ]
    replaced = codemode("skills", "add", str(skill), "--replace", "--base", base)
    assert replaced.returncode == 0 and replaced.stdout.startswith("saved skill greet v2")


# ----------------------------------------------------------------------------- serve


def test_serve_on_a_busy_port_names_it_and_suggests_port_0(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = codemode(
            "serve", "--base", str(tmp_path / "ws"), "--transport", "http",
            "--port", str(port), "--no-auth", "--executor", "subprocess",
        )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"Error: port {port} on 127.0.0.1 is already in use; choose another with --port N, "
        "or --port 0 to pick a free one"
    )


def test_serve_with_port_0_prints_the_port_it_chose(tmp_path: Path) -> None:
    argv = [*CLI, "serve", "--base", str(tmp_path / "ws"), "--transport", "http"]
    argv += ["--port", "0", "--no-auth", "--executor", "subprocess"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        line = proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stderr.close()
    found = re.fullmatch(
        r"codemode: serving MCP on http://127\.0\.0\.1:(\d+)/mcp \(streamable HTTP; "
        r"auth: none, loopback only; executor: subprocess\)\n",
        line,
    )
    assert found is not None, line
    assert int(found.group(1)) > 0


def test_serve_on_a_terminal_says_what_it_is_waiting_for(tmp_path: Path) -> None:
    argv = [*CLI, "serve", "--base", str(tmp_path / "ws"), "--executor", "subprocess"]
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execv(sys.executable, argv)
    screen = b""
    deadline = time.monotonic() + 60
    while b"Ctrl-C stops it." not in screen:
        assert time.monotonic() < deadline, screen
        screen += os.read(fd, 65536)
    os.kill(pid, signal.SIGINT)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    assert screen.decode().replace("\r\n", "\n").splitlines()[0] == (
        "codemode: serving MCP over stdio: an MCP client starts this command and talks to it "
        "on stdin/stdout (e.g. claude mcp add codemode -- codemode serve); for clients that "
        "connect over the network: codemode serve --transport http. Ctrl-C stops it."
    )


def test_the_usage_line_in_docs_names_every_serve_option() -> None:
    docs = (REPO / "docs" / "server.md").read_text()
    usage = docs.split("```text\ncodemode serve", 1)[1].split("```", 1)[0]
    documented = set(re.findall(r"--[a-z-]+", usage))
    options = {
        opt
        for param in serve.params
        if isinstance(param, click.Option)
        for opt in param.opts
        if opt.startswith("--") and opt != "--help"
    }
    assert options == documented


# ----------------------------------------------------------------------------- doctor, completion


def test_doctor_exits_1_and_names_the_fix_when_bubblewrap_is_missing() -> None:
    done = codemode("doctor", "--bwrap", "/nonexistent/bwrap")
    assert done.returncode == 1
    first, fix = done.stdout.splitlines()[:2]
    assert first.split(None, 2) == ["MISSING", "bubblewrap", "'/nonexistent/bwrap' not found"]
    assert fix.strip() == "fix: apt-get install bubblewrap (or dnf/pacman install bubblewrap)"
    assert fix.index("fix:") == first.index("'/nonexistent")  # the fix lines up under the detail


def test_the_completion_script_installs_in_bash_and_completes_commands() -> None:
    script = codemode("completion", "bash")
    assert script.returncode == 0
    shell = subprocess.run(
        ["bash", "-c", 'eval "$(cat)"; complete -p codemode'],
        input=script.stdout, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shell.stdout.strip() == "complete -o nosort -F _codemode_completion codemode"
    env = {**os.environ, "COMP_WORDS": "codemode ru", "COMP_CWORD": "1"}
    env["_CODEMODE_COMPLETE"] = "bash_complete"
    asked = subprocess.run(CLI, env=env, capture_output=True, text=True, timeout=60)
    assert asked.stdout.splitlines() == ["plain,run"]


def test_completion_without_a_known_shell_asks_for_one() -> None:
    done = subprocess.run(
        [*CLI, "completion"], capture_output=True, text=True, timeout=60,
        env={**os.environ, "SHELL": "/bin/tcsh"},
    )  # fmt: skip
    assert done.returncode == 2
    assert (
        done.stderr.splitlines()[-1] == "Error: name the shell: codemode completion bash|zsh|fish"
    )


# ------------------------------------------------------------------- closed standard streams


def _closing(*fds: int) -> Callable[[], None]:
    def close() -> None:
        for fd in fds:
            os.close(fd)

    return close


def test_serve_over_stdio_with_stdin_closed_says_so_and_exits_2(tmp_path: Path) -> None:
    # an MCP client talks to it through stdin and stdout: started without them it used to
    # end in a traceback (sys.stdin is None)
    for fd, name in ((0, "stdin"), (1, "stdout")):
        done = subprocess.run(
            [*CLI, "serve", "--base", str(tmp_path / "ws"), "--executor", "subprocess"],
            stdin=subprocess.DEVNULL, capture_output=True, preexec_fn=_closing(fd),
            timeout=120, text=True,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert f"started with its {name} closed" in done.stderr
        assert "Traceback" not in done.stderr


def test_run_with_stdout_closed_discards_the_output_and_no_file_receives_it(
    tmp_path: Path,
) -> None:
    # with fd 1 closed, sys.stdout was None (a traceback at the first echo) and the first
    # file opened took number 1, so anything written to "stdout" would have landed in it
    files = tmp_path / "ws" / "files"
    files.mkdir(parents=True)
    code = "import os\nfd = os.open('mine', os.O_CREAT | os.O_WRONLY)\nprint(fd)\nos.close(fd)"
    done = subprocess.run(
        [*CLI, "run", "--no-tools", "--executor", "inprocess", "--base", str(tmp_path / "ws"),
         "-c", code],
        stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_closing(1), timeout=120,
        cwd=files, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (files / "mine").read_bytes() == b""  # the printed number did not land in it
