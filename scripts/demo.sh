#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs a visible demo of code mode (examples/demo.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/demo.py
