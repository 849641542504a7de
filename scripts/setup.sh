#!/usr/bin/env bash
# Installs everything codemode's demo and tests need on a fresh Debian machine:
# system packages (bubblewrap, redis), a virtualenv with codemode, and the real MCP
# servers the tests talk to. Idempotent; safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

PY="${PYTHON:-$(command -v python3.11 || command -v python3)}"
PYV="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

need_apt=()
# chromium: the web console's browser tests (Playwright drives it; no browser downloads)
for pkg in bubblewrap redis-server libseccomp2 util-linux chromium; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
# The sandbox runs a system interpreter of the same version when the venv's base
# interpreter is not readable by its unprivileged uid (e.g. pyenv under /root).
[ -x "/usr/bin/python$PYV" ] || need_apt+=("python$PYV")
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $PY"
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev,redis,bench,plot,agent,examples,ner,otel,ray]"

if [ -f .ci/install-test-servers.sh ]; then
  bash .ci/install-test-servers.sh
fi
echo "setup: done"
