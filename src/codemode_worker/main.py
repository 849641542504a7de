"""Entry point of a subprocess worker: wire the pipes, then serve run/reset commands.

File descriptors at start (set up by the host):
  0  frames host -> worker          1  frames worker -> host
  2  raw stderr (diagnostics)       config["out_fd"]  raw stdout for fd-level writes
  config["ctrl_fd"]  interrupts from the host: ``i<run id>\\n``

Numbers other than 0-2 come from the config, never fixed: the host passes whatever
numbers its pipes have.
"""

from __future__ import annotations

import faulthandler
import json
import os
import select
import signal
import sys
import threading
from typing import Any

from . import protocol


def _setup_fds(config: dict[str, Any]) -> tuple[int, int]:
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    out_fd = int(config["out_fd"])
    os.dup2(out_fd, 1)
    os.close(out_fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    for fd in (proto_in, proto_out):
        os.set_inheritable(fd, False)
    return proto_in, proto_out


def _apply_limits(config: dict[str, Any]) -> None:
    mem = config.get("memory_limit_mb")
    if mem:
        import resource

        limit = int(mem) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


RESEND = 0.02
"""Seconds between SIGINTs for a run whose handler has not run yet (see ``_Gate``)."""


class _Gate:
    """Interrupts reach only the run they name, never a later run or a reply in progress.

    The host names the run (``i<id>\\n`` on the control pipe): an interrupt for a run that
    has not started yet (cancelled while its frame was in flight) stops it before it starts.

    A SIGINT can be taken by the C-level handler and still never reach the Python one: on
    CPython 3.11 another thread taking the GIL can clear the main thread's pending-signal
    check, and a main thread that then enters a blocking call (``time.sleep``) sleeps
    through it. So the SIGINT is sent again until its handler has run for that run; once
    it has, the run got its one KeyboardInterrupt (as one Ctrl-C gives), and no more.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: int | None = None
        self.interrupted = 0  # the highest run id the host interrupted
        self.raised = 0  # the last run id the handler raised KeyboardInterrupt in

    def start(self, run_id: int) -> bool:
        with self.lock:
            if run_id <= self.interrupted:
                return False
            self.running = run_id
            return True

    def stop(self) -> None:
        with self.lock:
            self.running = None

    def on_sigint(self, signum: int, frame: Any) -> None:
        """SIGINT's handler: Python runs it in the main thread at a safe point, which can be
        just after the run ended; then it is dropped instead of breaking the reply.
        Lock-free: it may run while the main thread holds ``lock`` (in ``start``)."""
        running = self.running
        if running is not None:
            self.raised = running
            raise KeyboardInterrupt

    def interrupt(self, run_id: int, main_ident: int) -> bool:
        """Note the interrupt; signal the run if it is running. True: it must be checked
        again (``unanswered``) until its handler ran."""
        with self.lock:
            self.interrupted = max(self.interrupted, run_id)
            if self.running == run_id and self.raised != run_id:
                signal.pthread_kill(main_ident, signal.SIGINT)
                return True
            return False


def _watch_interrupts(ctrl_fd: int, main_ident: int, gate: _Gate) -> None:
    """Turn each ``i<run id>\\n`` line on the control pipe into SIGINT for that run, sent
    again every ``RESEND`` s until the run's handler has run (see ``_Gate``)."""

    def loop() -> None:
        pending = b""
        poller = select.poll()  # no fd-number ceiling, unlike select()
        poller.register(ctrl_fd, select.POLLIN)
        unanswered = 0  # a run signalled whose handler has not run yet
        while True:
            if unanswered and not poller.poll(RESEND * 1000):
                if not gate.interrupt(unanswered, main_ident):
                    unanswered = 0
                continue
            try:
                data = os.read(ctrl_fd, 256)
            except OSError:
                return
            if not data:
                return
            *lines, pending = (pending + data).split(b"\n")
            pending = pending[-64:]
            for line in lines:
                if line[:1] == b"i" and line[1:].isdigit():
                    run_id = int(line[1:])
                    if gate.interrupt(run_id, main_ident):
                        unanswered = run_id

    threading.Thread(target=loop, name="codemode-interrupts", daemon=True).start()


def _fit(result: dict[str, Any], cap: int) -> None:
    """Shrink a run's result so its frame fits the host's cap for "done" frames.

    Only pathological output gets here (a million control characters escape to six bytes
    each): the host stops a worker whose frame is over the cap. Each of the four large
    fields gets a quarter of the room; only those over it are cut.
    """
    share = (cap - 65536) // 4  # bytes per field once encoded

    def size(value: Any) -> int:
        return len(protocol.dumps(value, lossy=True))

    for key, flag in (("stdout", "stdout_truncated"), ("stderr", "stderr_truncated")):
        text = result.get(key)
        if isinstance(text, str) and size(text) > share:
            result[key] = text[: share // 6] + f"\n[... {len(text)} characters in all]\n"
            result[flag] = True
    if size(result.get("value")) > share:
        result.update(value="<the value is too large to send>", value_is_repr=True)
        result["value_truncated"] = True
    err = result.get("error")
    if isinstance(err, dict):
        for key in ("message", "traceback"):
            text = err.get(key)
            if isinstance(text, str) and size(text) > share // 2:
                err[key] = text[: share // 12] + f"\n[... {len(text)} characters in all]"


def main(config: dict[str, Any]) -> None:
    proto_in, proto_out = _setup_fds(config)
    faulthandler.enable(file=sys.__stderr__ or sys.stderr)
    _apply_limits(config)
    # After the standard library, as site-packages would be: a module of the deps
    # directory (which any session of the workspace may fill) named like a standard one
    # (asyncio, inspect, csv) must not replace it in every worker, the worker's own lazy
    # imports included.
    for path in [*config.get("paths", []), *config.get("tail_paths", [])]:
        if path not in sys.path:
            sys.path.append(path)
    if config.get("cwd"):
        os.chdir(config["cwd"])

    from . import bridge, namespaces, protocol
    from .runtime import Runtime, inherit_capture_in_threads, install_routers

    limits = config.get("frame_limits") or {}
    link = bridge.PipeLink(proto_in, proto_out, **limits)
    bridge.set_link(link)
    runtime = Runtime(
        max_output=int(config.get("max_output", 1_000_000)),
        install_namespaces=namespaces.install,
    )
    install_routers(runtime.active, fallback=False)
    inherit_capture_in_threads()
    gate = _Gate()
    # Interrupts arrive as SIGINT: a launcher that ignores or blocks it (a Ray worker
    # process, nohup, some service managers) must not pass that on, or a timeout could
    # only kill the worker.
    signal.signal(signal.SIGINT, gate.on_sigint)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if "ctrl_fd" in config:
        ctrl_fd = int(config["ctrl_fd"])
        os.set_inheritable(ctrl_fd, False)  # the agent's subprocesses must not read it
        _watch_interrupts(ctrl_fd, threading.get_ident(), gate)

    runtime.warm_up()  # before "ready": a pre-started worker pays it in the background
    link.send({"op": "ready", "pid": os.getpid(), "protocol": protocol.VERSION})
    while True:
        try:
            msg = link.next_command()
        except KeyboardInterrupt:
            continue  # an interrupt that arrived between runs
        if msg is None or msg.get("op") == "shutdown":
            break
        op = msg.get("op")
        result: Any = None
        try:
            if op == "run" and gate.start(int(msg["id"])):
                result = runtime.run(str(msg.get("code", "")))
                gate.stop()
            elif op == "reset":
                runtime.reset()
        except KeyboardInterrupt:
            gate.stop()
            result = None
        done = {"op": "done", "id": msg.get("id"), "result": result}
        data = protocol.encode_frame(done, lossy=True)  # a lone surrogate must not stop it
        if len(data) > link.max_done and isinstance(result, dict):
            _fit(result, link.max_done)
            data = protocol.encode_frame(done, lossy=True)
        link.send_bytes(data)
    os._exit(0)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
