"""Scale-out: sessions whose workers live on a Ray cluster (``executor: ray``).

Needs the optional extra ``codemode[ray]``; importing this package does not import Ray.
"""

from __future__ import annotations

from .config import RayConfig
from .executor import RayExecutor, RayWorker

__all__ = ["RayConfig", "RayExecutor", "RayWorker"]
