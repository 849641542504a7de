from __future__ import annotations

from pathlib import Path

import pytest

from codemode.memory.skills import Skills
from codemode.storage import FileStorage


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def skills(tmp_path: Path) -> Skills:
    return Skills(FileStorage(tmp_path))
