from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "storage"))

from storage_fixtures import redis_server, storage  # noqa: F401  (fixtures)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workspace() -> Iterator[str]:
    """A host directory the sandbox uid can reach (pytest's tmp_path is mode 700)."""
    path = tempfile.mkdtemp(prefix="cm-ckpt-ws-", dir="/var/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)
