#!/usr/bin/env bash
# Install the real third-party MCP servers codemode's tests run against.
#
# Idempotent: a stamp file records what was installed; re-running with the same pins
# does nothing. Everything lands next to this script:
#   .ci/node/node_modules/...          npm servers + MCP Inspector CLI 0.15 (the machine's Node 20)
#   .ci/node22/node_modules/.bin/node  Node 22 from the npm registry's `node` package, and
#   .ci/node22/node_modules/.bin/mcp-inspector   MCP Inspector 2.x, which needs Node >= 22.19
#   .ci/venvs/<name>/bin/python        one venv per PyPI server (their pins clash with ours)
# Override the interpreter for the venvs with PYTHON=/path/to/python3.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
NODE_DIR="$HERE/node"
NODE22_DIR="$HERE/node22"
VENVS="$HERE/venvs"
PY="${PYTHON:-python3}"

# Versions verified with `npm view` / `pip index versions` on 2026-11-21.
NPM_PINS=(
  "@modelcontextprotocol/server-filesystem@2026.8.31"
  "@modelcontextprotocol/server-memory@2026.8.31"
  "@modelcontextprotocol/server-everything@2026.8.31"
  "@modelcontextprotocol/inspector@0.15.0"
)
NODE22_PINS=(
  "node@22.23.3"
  "@modelcontextprotocol/inspector@2.12.0"
)
PYPI_PINS=(
  "mcp-server-time==2026.10.19"
  "mcp-server-git==2026.10.19"
)

log() { printf '[install-test-servers] %s\n' "$*" >&2; }

# install_npm DIR LABEL PIN...: npm packages into DIR. A `node@...` pin is installed first,
# then the rest with that Node on PATH (packages that need a newer Node than the machine's).
install_npm() {
  local dir="$1" label="$2"
  shift 2
  local stamp="$dir/.codemode-stamp" want="$*" pin node_pin=""
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -d "$dir/node_modules" ]]; then
    echo "$label:cached"
    return
  fi
  mkdir -p "$dir"
  [[ -f "$dir/package.json" ]] || echo "{\"name\": \"codemode-$label\", \"private\": true}" >"$dir/package.json"
  for pin in "$@"; do [[ "$pin" == node@* ]] && node_pin="$pin"; done
  if [[ -n "$node_pin" ]]; then
    log "npm install $node_pin into $dir"
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --save-exact "$node_pin" >&2)
  fi
  log "npm install $* into $dir"
  (cd "$dir" && PATH="$dir/node_modules/.bin:$PATH" \
    npm install --no-audit --no-fund --loglevel=error --save-exact "$@" >&2)
  echo "$want" >"$stamp"
  echo "$label:installed"
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

summary=("$(install_npm "$NODE_DIR" npm "${NPM_PINS[@]}")")
summary+=("$(install_npm "$NODE22_DIR" node22 "${NODE22_PINS[@]}")")
for pin in "${PYPI_PINS[@]}"; do
  summary+=("$(install_pypi "$pin")")
done
echo "test servers ready in $HERE (${summary[*]})"
