#!/usr/bin/env bash
# Install the real third-party MCP servers codemode's tests run against.
#
# Idempotent: a stamp file records what was installed; re-running with the same pins
# does nothing. Everything lands next to this script:
#   .ci/node/node_modules/...          npm servers + MCP Inspector CLI (run with `node`)
#   .ci/venvs/<name>/bin/python        one venv per PyPI server (their pins clash with ours)
# Override the interpreter for the venvs with PYTHON=/path/to/python3.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
NODE_DIR="$HERE/node"
VENVS="$HERE/venvs"
PY="${PYTHON:-python3}"

# Versions verified with `npm view` / `pip index versions` on 2026-11-21.
NPM_PINS=(
  "@modelcontextprotocol/server-filesystem@2026.8.31"
  "@modelcontextprotocol/server-memory@2026.8.31"
  "@modelcontextprotocol/server-everything@2026.8.31"
  "@modelcontextprotocol/inspector@0.15.0"
)
PYPI_PINS=(
  "mcp-server-time==2026.10.19"
  "mcp-server-git==2026.10.19"
)

log() { printf '[install-test-servers] %s\n' "$*" >&2; }

install_npm() {
  local stamp="$NODE_DIR/.codemode-stamp" want="${NPM_PINS[*]}"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -d "$NODE_DIR/node_modules" ]]; then
    echo "npm:cached"
    return
  fi
  mkdir -p "$NODE_DIR"
  [[ -f "$NODE_DIR/package.json" ]] || echo '{"name": "codemode-test-servers", "private": true}' >"$NODE_DIR/package.json"
  log "npm install ${NPM_PINS[*]}"
  (cd "$NODE_DIR" && npm install --no-audit --no-fund --loglevel=error --save-exact "${NPM_PINS[@]}" >&2)
  echo "$want" >"$stamp"
  echo "npm:installed"
}

install_pypi() {
  local pin="$1" name="${1%%==*}"
  local venv="$VENVS/$name" stamp="$VENVS/$name/.codemode-stamp"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$pin" && -x "$venv/bin/python" ]]; then
    echo "$name:cached"
    return
  fi
  mkdir -p "$VENVS"
  [[ -x "$venv/bin/python" ]] || "$PY" -m venv "$venv"
  log "pip install $pin into $venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$pin" >&2
  echo "$pin" >"$stamp"
  echo "$name:installed"
}

summary=("$(install_npm)")
for pin in "${PYPI_PINS[@]}"; do
  summary+=("$(install_pypi "$pin")")
done
echo "test servers ready in $HERE (${summary[*]})"
