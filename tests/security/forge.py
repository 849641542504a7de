"""Code the attacker's session runs before forging frames (shared with
``benchmarks/bench_hostile_host.py``; standard library only, no test imports)."""

# Defined in the attacker's session: the id of the run in progress (read from the worker's
# main loop), a raw frame writer, and an honest-looking run result to corrupt.
FORGE = r"""
import json, os, struct, sys, threading, time
from codemode_worker import bridge
def run_id():
    f = sys._getframe()
    while f is not None:
        m = f.f_locals.get("msg")
        if isinstance(m, dict) and m.get("op") == "run":
            return m["id"]
        f = f.f_back
def forge(body):
    if isinstance(body, dict):
        body = json.dumps(body, separators=(",", ":")).encode()
    os.write(bridge._link.fd_out, struct.pack(">I", len(body)) + body)
def result(**changes):
    r = {"stdout": "", "stderr": "", "stdout_truncated": False, "stderr_truncated": False,
         "error": None, "duration_ms": 1.0, "has_value": True, "value": 1,
         "value_is_repr": False, "value_truncated": False}
    r.update(changes)
    return r
def error(**changes):
    e = {"type": "ValueError", "message": "m", "traceback": "", "lineno": 1, "offset": None}
    e.update(changes)
    return e
"""
