#!/usr/bin/env bash
# Installs what a new machine lacks for the demo and the tests: redis-server
# (Debian), this package with its test tools (pip), the pinned upstream
# control-plane binaries (built once from the Go module proxy, then cached) and
# pinned npm packages the GitHub stand-in reads (npm_fetch, at the end).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
step() { printf '[setup] %s\n' "$*" >&2; }

if ! command -v redis-server >/dev/null 2>&1; then
  step "installing Debian's redis-server"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi
if ! python3 -c 'import agentchain, kopf, pytest, githubkit, jwt' 2>/dev/null; then
  step "pip install -e '.[test]'"
  python3 -m pip install -q -e '.[test]'
fi
step "control-plane binaries (built on the first run, as README says; cached afterwards)"
bash e2e/controlplane/build-binaries.sh all >/dev/null
bash e2e/controlplane/build-binaries.sh helm >/dev/null

# npm_fetch PKG VERSION [PATH...]: unpack an npm package (only PATHs inside it, if given)
# into ~/.cache/agentchain/npm/<pkg>-<version>/package, e.g. @octokit/openapi 23.0.2 ->
# octokit-openapi-23.0.2/package. Cached by version; Debian's npm is installed if missing.
npm_fetch() {
  local pkg=$1 version=$2
  shift 2
  local dir
  dir="$HOME/.cache/agentchain/npm/$(printf '%s' "${pkg#@}" | tr / -)-$version"
  [ -f "$dir/.complete" ] && return 0
  if ! command -v npm >/dev/null 2>&1; then
    step "installing Debian's nodejs and npm"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  fi
  step "npm package $pkg@$version"
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && npm pack --silent "$pkg@$version" >/dev/null && tar -xzf ./*.tgz "${@/#/package/}" && rm ./*.tgz)
  touch "$dir/.complete"
}

# GitHub's REST description, read by the GitHub stand-in (e2e/github).
# shellcheck source=e2e/github/versions.env
. e2e/github/versions.env
npm_fetch @octokit/openapi "$OCTOKIT_OPENAPI_VERSION" generated/api.github.com.json
