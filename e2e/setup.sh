#!/usr/bin/env bash
# Installs what a new machine lacks for the demo and the tests: redis-server
# (Debian), this package with its test tools (pip), and the pinned upstream
# control-plane binaries (built once from the Go module proxy, then cached).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
step() { printf '[setup] %s\n' "$*" >&2; }

if ! command -v redis-server >/dev/null 2>&1; then
  step "installing Debian's redis-server"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi
if ! python3 -c 'import agentchain, kopf, pytest' 2>/dev/null; then
  step "pip install -e '.[test]'"
  python3 -m pip install -q -e '.[test]'
fi
step "control-plane binaries (built on the first run, as README says; cached afterwards)"
bash e2e/controlplane/build-binaries.sh all >/dev/null
bash e2e/controlplane/build-binaries.sh helm >/dev/null
