"""The Ray cluster a benchmark measures: the one at ``--address``, or a head and one node
started here; whatever Ray and the warm pools hold is released afterwards."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from codemode.cluster.local import LocalCluster
from codemode.execution.pool import close_pools


@contextmanager
def ray_cluster(address: str | None) -> Iterator[tuple[str, LocalCluster | None]]:
    """``(address, the local cluster or None)``."""
    cluster = None
    try:
        if address is None:
            t = time.perf_counter()
            cluster = LocalCluster()
            cluster.start_head()
            cluster.add_node("b")
            address = cluster.address
            print(f"local cluster (head + 1 node) started in {time.perf_counter() - t:.1f} s")
        yield address, cluster
    finally:
        close_pools()
        if "ray" in sys.modules:
            sys.modules["ray"].shutdown()
        if cluster is not None:
            cluster.close()
