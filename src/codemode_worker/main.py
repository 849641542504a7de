"""Entry point of a subprocess worker: wire the pipes, then serve run/reset commands.

File descriptors at start (set up by the host):
  0  frames host -> worker          1  frames worker -> host
  2  raw stderr (diagnostics)       config["out_fd"]  raw stdout for fd-level writes
  config["ctrl_fd"]  interrupt bytes from the host
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
from typing import Any


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


class _Gate:
    """Interrupts are delivered only while a run is in progress, never mid-reply."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = False

    def set(self, running: bool) -> None:
        with self.lock:
            self.running = running


def _watch_interrupts(ctrl_fd: int, main_ident: int, gate: _Gate) -> None:
    """Turn each byte on the control pipe into SIGINT for the main thread."""

    def loop() -> None:
        while True:
            try:
                data = os.read(ctrl_fd, 64)
            except OSError:
                return
            if not data:
                return
            if b"i" in data:
                with gate.lock:
                    if gate.running:
                        signal.pthread_kill(main_ident, signal.SIGINT)

    threading.Thread(target=loop, name="codemode-interrupts", daemon=True).start()


def main(config: dict[str, Any]) -> None:
    proto_in, proto_out = _setup_fds(config)
    faulthandler.enable(file=sys.__stderr__ or sys.stderr)
    _apply_limits(config)
    for path in reversed(config.get("paths", [])):
        if path not in sys.path:
            sys.path.insert(0, path)
    sys.path.extend(p for p in config.get("tail_paths", []) if p not in sys.path)
    if config.get("cwd"):
        os.chdir(config["cwd"])

    from . import bridge, namespaces, protocol
    from .runtime import Runtime, inherit_capture_in_threads, install_routers

    link = bridge.PipeLink(proto_in, proto_out)
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
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if "ctrl_fd" in config:
        _watch_interrupts(int(config["ctrl_fd"]), threading.get_ident(), gate)

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
            if op == "run":
                gate.set(True)
                result = runtime.run(str(msg.get("code", "")))
                gate.set(False)
            elif op == "reset":
                runtime.reset()
        except KeyboardInterrupt:
            gate.set(False)
            result = None
        link.send({"op": "done", "id": msg.get("id"), "result": result})
    os._exit(0)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
