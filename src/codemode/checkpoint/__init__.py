"""Session checkpoints: a session's variables saved to storage and restored into a fresh
worker (after a crash, an eviction, on another node). See docs/checkpoints.md."""

from .store import CheckpointInfo, Checkpoints

__all__ = ["CheckpointInfo", "Checkpoints"]
