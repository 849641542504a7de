"""A real Chromium (Debian's ``chromium``, installed by scripts/setup.sh) driven by
Playwright; Playwright's own browser downloads are never used.

The ``browser`` fixture (conftest.py imports it). Without the browser the tests skip with
the fix, except where ``CODEMODE_BROWSER_STRICT=1`` (set by ``.ci/run``): there a missing
browser fails them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
"""Screenshots of the browser tests (kept after the run; git ignores the folder)."""


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_path()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        path = None
    if path is None:
        why = "Chromium or Playwright is missing: run scripts/setup.sh (apt chromium, pip .[dev])"
        if os.environ.get("CODEMODE_BROWSER_STRICT") == "1":
            pytest.fail(why)
        pytest.skip(why)
    with sync_playwright() as p:
        # --no-sandbox: CI runs as root, where Chromium's own sandbox cannot start.
        b = p.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()
