#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the checks CI runs: ruff, mypy --strict, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -z "${TIKTOKEN_CACHE_DIR:-}" ] && [ -d ../shared/tiktoken ]; then
  export TIKTOKEN_CACHE_DIR="$PWD/../shared/tiktoken"
fi
echo "== ruff"
.venv/bin/ruff check src tests benchmarks examples
.venv/bin/ruff format --check src tests benchmarks examples
echo "== mypy --strict"
.venv/bin/mypy
echo "== pytest"
.venv/bin/pytest -q -p no:cacheprovider "$@"
if [ $# -eq 0 ]; then  # the whole run: also check the package as users install it
  echo "== packaging: wheel in clean venvs (minimal and each extra), smoke session, import time, size"
  .venv/bin/python benchmarks/bench_packaging.py --quick
fi
