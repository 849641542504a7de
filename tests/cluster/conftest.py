"""A real local Ray cluster for the ``ray`` tests (one for the package): a head and a worker
node, each a ``ray start --block`` process group on this machine
(``codemode.cluster.local``), torn down after. Sessions ask for the ``codemode`` resource,
which only worker nodes offer, so tests may kill a session's node like a dying machine.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.cluster.local import LocalCluster, Node

sys.path.insert(0, str(Path(__file__).parents[1] / "storage"))
from redis_server import RedisServer as RedisServer  # tests/storage's real Redis; re-exported

# Token authentication on, as docs/ray.md asks of a real cluster. Ray reads these when it
# is imported, so the driver (this process) gets them first; nothing else reads them.
AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
os.environ.update(AUTH)

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install codemode[ray]")

SESSION_RESOURCES = {"codemode": 0.01}
JOIN_TIMEOUT = 180.0
"""Bounded but generous: a loaded 2-core machine starts a node in 20-40 s."""


class RayCluster(LocalCluster):
    """The local cluster, with this process joined as its driver."""

    def connect(self) -> None:
        ray.init(
            address=self.address, namespace="codemode", logging_level="ERROR", log_to_driver=False
        )

    def add_node(self, name: str, *, sessions: float = 100) -> Node:
        node = super().add_node(name, sessions=sessions)
        deadline = time.monotonic() + JOIN_TIMEOUT
        while not node.node_id:  # until the cluster lists it alive (it can place actors)
            if time.monotonic() > deadline:
                raise RuntimeError(f"ray node {name} did not join within {JOIN_TIMEOUT} s")
            self.identify(ray.nodes())
            time.sleep(0.2)
        return node

    def close(self) -> None:
        with contextlib.suppress(Exception):
            ray.shutdown()
        super().close()


@pytest.fixture(scope="package")
def cluster() -> Iterator[RayCluster]:
    c = RayCluster(auth_token=AUTH["RAY_AUTH_TOKEN"])
    try:
        c.start_head()
        c.connect()
        c.add_node("b")
        yield c
    finally:
        c.close()


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    """A real Redis of its own for the test (the replicas' shared directory)."""
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()
