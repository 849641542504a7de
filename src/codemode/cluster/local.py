"""A real Ray cluster on this machine, for development, tests and benchmarks.

Each node is a ``ray start --block`` process in a process group of its own, so a node
is stopped (or killed, like a machine that dies) by its group id and nothing else on the
machine is touched (``ray stop`` would end every Ray process of the machine). The head
offers no ``codemode`` resource; worker nodes do, so sessions asking for it
(``ray.resources``) land on worker nodes.

Ray reads ``RAY_AUTH_MODE``/``RAY_AUTH_TOKEN`` when it is imported: a driver that joins a
cluster started with ``auth_token`` must have them in its environment first
(:meth:`LocalCluster.auth_env`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ExecutorError

SESSION_RESOURCE = "codemode"
STARTED = "Ray runtime started"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Node:
    """One ``ray start --block`` process group."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    node_id: str = field(default="")

    def started(self) -> bool:
        return STARTED in self.log.read_text(errors="replace")

    def kill(self) -> None:
        """The whole node at once (raylet, its workers, their actors): a lost machine."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        self.kill()


class LocalCluster:
    """A head and worker nodes on loopback, in a private temp dir; ``close()`` ends them."""

    def __init__(
        self,
        *,
        auth_token: str | None = None,
        object_store_mb: int = 100,
        start_timeout: float = 180.0,
    ) -> None:
        # Ray's unix sockets live under the temp dir: keep its path short.
        self.tmp = Path(tempfile.mkdtemp(prefix="cmray-", dir="/tmp"))
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: list[Node] = []
        self.auth_token = auth_token
        self.object_store_mb = object_store_mb
        self.start_timeout = start_timeout
        self.ray = str(Path(sys.executable).with_name("ray"))

    def auth_env(self) -> dict[str, str]:
        if self.auth_token is None:
            return {}
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.auth_token}

    def _start(self, name: str, args: list[str]) -> Node:
        log = self.tmp / f"{name}.log"
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **self.auth_env()}
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [self.ray, "start", "--block", "--disable-usage-stats",
                 "--node-ip-address=127.0.0.1", "--num-cpus=1",
                 f"--object-store-memory={self.object_store_mb << 20}", *args],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                cwd=self.tmp,
            )  # fmt: skip
        node = Node(name, proc, log)
        self.nodes.append(node)
        self._wait(node)
        return node

    def _wait(self, node: Node) -> None:
        deadline = time.monotonic() + self.start_timeout
        while not node.started():
            if node.proc.poll() is not None or time.monotonic() > deadline:
                tail = node.log.read_text(errors="replace")[-3000:]
                raise ExecutorError(f"ray node {node.name} did not start:\n{tail}")
            time.sleep(0.2)

    def start_head(self) -> Node:
        return self._start(
            "head",
            ["--head", f"--port={self.port}", "--include-dashboard=false",
             f"--temp-dir={self.tmp / 'ray'}", f"--resources={json.dumps({'cm_head': 1})}"],
        )  # fmt: skip

    def add_node(self, name: str, *, sessions: float = 100) -> Node:
        """A worker node offering ``sessions`` units of the ``codemode`` resource, and a
        resource ``cm_<name>`` that names it (``node_of`` finds a node by Ray's id)."""
        resources = {SESSION_RESOURCE: sessions, f"cm_{name}": 1}
        return self._start(
            name, [f"--address={self.address}", f"--resources={json.dumps(resources)}"]
        )

    def identify(self, nodes: list[dict[str, Any]]) -> None:
        """Learn Ray's node ids from ``ray.nodes()`` (of a connected driver)."""
        for info in nodes:
            for node in self.nodes:
                if info.get("Alive") and f"cm_{node.name}" in info.get("Resources", {}):
                    node.node_id = str(info["NodeID"])

    def node_of(self, node_id: str) -> Node:
        return next(n for n in self.nodes if n.node_id == node_id)

    def close(self) -> None:
        for node in reversed(self.nodes):
            node.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)
