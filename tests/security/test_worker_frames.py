"""Forged frames from the worker end that worker alone, whatever their shape or size.

The agent's code can write anything to the protocol pipe (``bridge._link.fd_out``). Each
case forges one class of frame; the host must stop the attacker's worker with a clear
error, settle its run, stay small and responsive, and leave the bystander alone.
"""

from __future__ import annotations

import asyncio

import pytest

from .conftest import Arena
from .forge import FORGE

pytestmark = [pytest.mark.anyio, pytest.mark.security]

FORGED = {
    "a done frame whose error is a string": """forge({"op": "done", "id": run_id(),
        "result": result(error="boom")})""",
    "a done frame whose error has a text line number": """forge({"op": "done",
        "id": run_id(), "result": result(error=error(lineno="7"))})""",
    "a done frame whose result is a list": """forge({"op": "done", "id": run_id(),
        "result": [1, 2]})""",
    "a done frame whose flags are not booleans": """forge({"op": "done", "id": run_id(),
        "result": result(has_value="yes")})""",
    "a done frame with an extra field": """forge({"op": "done", "id": run_id(),
        "result": result(), "pwn": 1})""",
    "a done frame whose id is Infinity": """forge(b'{"op":"done","id":Infinity,"result":null}')""",
    "a done frame whose id is a 40-digit number": """forge({"op": "done", "id": 10**40,
        "result": None})""",
    "a done frame whose id is true": """forge({"op": "done", "id": True, "result": None})""",
    "a done frame whose id is a float": """forge({"op": "done", "id": float(run_id()),
        "result": None})""",
    "a done frame for a run never sent": """forge({"op": "done", "id": run_id() + 1000,
        "result": None})""",
    "a call frame whose id is negative": """forge({"op": "call", "id": -1,
        "method": "tools.servers", "params": {}})""",
    # (params of the wrong shape are the method's business: a clear error to the code,
    # see tests/test_rpc.py::test_malformed_params_from_the_code_come_back_as_clear_errors)
    "a call frame whose method is a number": """forge({"op": "call", "id": 5,
        "method": 7, "params": {}})""",
    "an attachment reference past the frame's end": """forge(b'{"op":"call","id":5,'
        b'"method":"m","params":{"a":{"__cm_att__":[0,99999,"b"]}}}\\nxx')""",
    "an attachment that is not UTF-8 text": """forge(b'{"op":"call","id":5,'
        b'"method":"m","params":{"a":{"__cm_att__":[0,2,"s"]}}}\\n\\xff\\xfe')""",
    "a done frame with attachments": """forge(b'{"op":"done","id":%d,"result":null}\\nxx'
        % run_id())""",
    "a second ready frame": """forge({"op": "ready", "pid": 1})""",
    "an unknown op": """forge({"op": "exec", "id": 1})""",
    "a frame whose op is not its first key": """forge(b'{"id":1,"op":"done","result":null}')""",
    "a ready frame over its cap": """forge(b'{"op":"ready","pid":1,"pad":"' + b'x' * 100_000
        + b'"}')""",
    "a done frame over its cap": """forge(b'{"op":"done","id":1,"result":"' + b'x' * 40_000_000
        + b'"}')""",
}


@pytest.mark.parametrize("forgery", list(FORGED), ids=list(FORGED))
async def test_a_forged_frame_ends_only_the_attackers_worker_with_a_clear_error(
    arena: Arena, forgery: str
) -> None:
    assert (await arena.attacker.run(FORGE)).error is None
    await arena.attacker.run("kept = 'state'")
    r = await arena.attack(FORGED[forgery] + "\ntime.sleep(5)", timeout=30)
    assert r.state_lost and r.error is not None, r.to_text()
    assert r.error.type == "WorkerCrashed" and "malformed" in r.error.message, r.error.message
    assert (await arena.attacker.run("'fresh'")).value == "fresh"


def _reset_peak_rss() -> int:
    """Reset this process's peak RSS (VmHWM) to its current RSS; return it in bytes."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    return _status_kb("VmRSS") * 1024


def _peak_rss() -> int:
    return _status_kb("VmHWM") * 1024


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


@pytest.mark.parametrize(
    ("lists", "why"),
    [(19_000_000, "is over"), (3_500_000, "JSON values")],
    ids=["57 MB: over the JSON cap of a call", "10 MB: over the budget of JSON values"],
)
async def test_a_frame_of_millions_of_empty_lists_is_refused_without_building_them(
    arena: Arena, lists: int, why: str
) -> None:
    # 19 million `[]` parsed: 1.5 GB of list objects on the host and seconds of stall
    assert (await arena.attacker.run(FORGE)).error is None
    code = (
        'body = b\'{"op":"call","id":1,"method":"m","params":{"a":[\' '
        f"+ b'[],' * {lists} + b'[]]}}}}'\n"
        "forge(body)\ndel body\ntime.sleep(10)"
    )
    before = _reset_peak_rss()
    r = await arena.attack(code, timeout=60)
    grown = _peak_rss() - before
    assert r.state_lost and r.error is not None, r.to_text()
    assert "malformed" in r.error.message and why in r.error.message, r.error.message
    assert grown < 600 << 20, f"the host grew by {grown >> 20} MB"
    assert (await arena.attacker.run("'fresh'")).value == "fresh"


RUNS_ON = {
    "code that forged its run's end": (
        'forge({"op": "done", "id": run_id(), "result": result()})\nwhile True:\n    pass'
    ),
    "a thread the run left running": (
        "def spin():\n    while True:\n        pass\n"
        "threading.Thread(target=spin, daemon=True).start()\n1"
    ),
    "short-lived processes a thread left behind starts": (
        "import subprocess\n"
        "burn = 'import time\\nt = time.process_time()\\n'\n"
        "burn += 'while time.process_time() - t < 0.3: pass'\n"
        "def spawn():\n    while True:\n"
        "        subprocess.run([sys.executable, '-c', burn])\n"
        "threading.Thread(target=spawn, daemon=True).start()\n1"
    ),
}


@pytest.mark.parametrize("code", list(RUNS_ON.values()), ids=list(RUNS_ON))
async def test_code_running_on_after_its_run_gets_no_more_cpu_than_a_run(
    arena: Arena, code: str
) -> None:
    """A forged ``done`` cannot be told from the worker's own (the code shares its process:
    any secret the worker holds, the code can read), so what matters is what code that
    outlives its run may do: as a thread left running may, it runs on between runs, and
    the host stops its worker once it has used a run's timeout of CPU (the kernel's
    count, which no frame changes)."""
    assert (await arena.attacker.run(FORGE)).error is None
    r = await arena.attack(code, timeout=2)
    assert r.error is None and r.value == 1, r.to_text()  # the host took it for the end
    await asyncio.sleep(8)  # ~2 s of CPU, counted every 2 s at most
    after = await arena.attacker.run("'next'", timeout=5)
    assert after.value == "next", after.to_text()
    assert any("used" in w and "of CPU after that run" in w for w in after.warnings), after


async def test_a_forged_done_is_caught_when_the_runs_own_end_comes(arena: Arena) -> None:
    """The code's frame ended its run early; the worker's own answer, when the code ends,
    is a second one: proof of the forgery. That worker is stopped, and the next run says
    why."""
    assert (await arena.attacker.run(FORGE)).error is None
    code = 'forge({"op": "done", "id": run_id(), "result": result()})\ntime.sleep(1)\n2'
    r = await arena.attack(code, timeout=10)
    assert r.error is None and r.value == 1, r.to_text()  # the forged result
    await asyncio.sleep(3)  # the code ends: the worker answers that run again
    after = await arena.attacker.run("'next'", timeout=10)
    assert after.value == "next", after.to_text()
    assert any("a second answer to request" in w for w in after.warnings), after.warnings
