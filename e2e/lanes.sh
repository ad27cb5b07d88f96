#!/usr/bin/env bash
# `make test`'s tests, in three lanes at once: the suite in $TEST_WORKERS pytest-xdist
# processes, and beside them the real node's own tests (`-m realnode`), which start
# clusters of their own.
#
# Why beside and not after: the real node's tests mostly wait (for the kubelet, pods,
# helm), so on two cores they add little to the xdist lanes' time, where after them they
# would add all of theirs. Their output is kept in a file and printed after the main
# lanes', so the two do not interleave. Any lane failing fails the run.
#
# Every cluster runs on a real node (kubelet and containerd), one per xdist worker and
# one for the -m realnode lane, each in a lane of its own (network and mount namespaces,
# e2e/controlplane/lane-ns.sh), so they all run at once without waiting for each other;
# the lanes share the machine's cgroup tree and kernel sysctls, which this script
# snapshots before the lanes and restores and compares once after them
# (`realnode_lanes hold`: a difference fails the run). Images are built first, while
# there is a network: a lane has none.
#
# The real node needs root. Without root (a developer's laptop) the tests that need a
# cluster skip, saying so, unless AGENTCHAIN_E2E_KUBECONFIG names a cluster to run them
# against; under CI (CI=true) not being root is a failure instead, so CI never passes
# without the real node. REALNODE=0 leaves the -m realnode lane out on purpose.
#
# Usage: lanes.sh <workers> [pytest args...]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=${PYTHON:-python3}
workers=$1
shift

if [ -n "${AGENTCHAIN_E2E_KUBECONFIG:-}" ]; then
  # An existing cluster (kind, ...): no real node, and its tests skip themselves.
  exec "$python" -m pytest -n "$workers" --dist loadfile --durations=30 "$@"
fi

realnode=${REALNODE:-1}
if [ "$(id -u)" != 0 ]; then
  if [ "${CI:-}" = true ]; then
    echo "[test] CI without root: the real node needs root, so the e2e tests cannot run" >&2
    exit 1
  fi
  echo "[test] not root: the e2e tests that need a cluster skip (the real node needs root;" \
    "or point AGENTCHAIN_E2E_KUBECONFIG at a cluster)" >&2
  exec "$python" -m pytest -m 'not realnode' -n "$workers" --dist loadfile --durations=30 "$@"
fi

if [ -z "${AGENTCHAIN_LANES_HELD:-}" ]; then
  # Built (or found cached) before the lanes start, so a cold build's output is not
  # hidden, and while there is a network.
  bash e2e/controlplane/build-binaries.sh node >/dev/null || exit 1
  bash e2e/controlplane/build-binaries.sh netpol >/dev/null || exit 1
  prebuild=()
  if [ "$realnode" = 1 ]; then prebuild=(--realnode); fi
  "$python" -m e2e.controlplane.realnode_lanes prebuild "${prebuild[@]}" || exit 1
  # The whole run in one machine session; another run's real node outside a lane (a
  # shared machine) is waited for, not failed.
  export AGENTCHAIN_LANES_HELD=1
  AGENTCHAIN_REALNODE_WAIT=${AGENTCHAIN_REALNODE_WAIT:-1800} \
    exec "$python" -m e2e.controlplane.realnode_lanes hold -- bash "$0" "$workers" "$@"
fi

pid=
if [ "$realnode" = 1 ]; then
  log=$(mktemp -t agentchain-realnode.XXXXXX.log)
  echo "[test] the real node's tests run beside the others; their output: $log" >&2
  e2e/controlplane/lane-ns.sh "$python" -m pytest -m realnode --durations=15 "$@" \
    >"$log" 2>&1 &
  pid=$!
fi

"$python" -m pytest -m 'not realnode' -n "$workers" --dist loadfile --durations=30 "$@"
main=$?

status=0
if [ -n "$pid" ]; then
  wait "$pid"
  status=$?
  echo
  echo "[test] the real node's tests (-m realnode), exit $status:"
  cat "$log"
fi
if [ "$main" -ne 0 ]; then exit "$main"; fi
exit "$status"
