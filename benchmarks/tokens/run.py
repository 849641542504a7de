"""Rerun the token benchmark: code mode against direct tool calling, on real MCP servers.

    python benchmarks/tokens/run.py [--json PATH] [--plot PATH] [--scenario NAME] [--quick]

Same as ``codemode bench tokens``; see README.md next to this file.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from codemode.bench.cli import tokens
except ImportError:  # a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    from codemode.bench.cli import tokens

if __name__ == "__main__":
    tokens(prog_name="run.py")
