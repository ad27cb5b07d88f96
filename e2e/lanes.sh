#!/usr/bin/env bash
# `make test`'s tests, in three lanes at once: the suite in $TEST_WORKERS pytest-xdist
# processes, and beside them the real node's tests (`-m realnode`), which need root.
#
# Why beside and not after: the real node's tests mostly wait (for the kubelet, pods,
# helm), so on two cores they add little to the xdist lanes' time, where after them they
# would add all of theirs. Their output is kept in a file and printed after the main
# lanes', so the two do not interleave. Any lane failing fails the run.
#
# E2E_NODE=real (or AGENTCHAIN_E2E_NODE=real) runs the xdist lanes' suite on real nodes
# too, one per worker. Then every real node runs in a lane of its own (network and mount
# namespaces, e2e/controlplane/lane-ns.sh), the -m realnode lane's too, so they all run
# at once without waiting for each other; the lanes share the machine's cgroup tree and
# kernel sysctls, which this script snapshots before the lanes and restores and compares
# once after them (`realnode_lanes hold`: a difference fails the run). Images are built
# first, while there is a network: a lane has none.
# By default (E2E_NODE=local) the suite runs on the local stand-in node and the real
# node's tests run as they always have, in the machine's own namespaces, holding the
# real-node lock alone (waiting for another run's node on a shared machine).
#
# Without root there is no real node: the lane is skipped with a message (a developer's
# laptop); under CI (CI=true) that is a failure instead, so CI never passes without it.
# REALNODE=0 leaves the lane out on purpose, REALNODE=1 requires it.
#
# Usage: lanes.sh <workers> [pytest args...]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=${PYTHON:-python3}
workers=$1
shift

node=${E2E_NODE:-${AGENTCHAIN_E2E_NODE:-local}}
if [ "$node" != local ] && [ "$node" != real ]; then
  echo "[test] E2E_NODE must be 'local' or 'real', not '$node'" >&2
  exit 2
fi
unset AGENTCHAIN_E2E_NODE

realnode=${REALNODE:-auto}
if [ "$realnode" = auto ]; then
  if [ "$(id -u)" = 0 ]; then realnode=1; elif [ "${CI:-}" = true ]; then
    echo "[test] CI without root: the real node's tests cannot run" >&2
    exit 1
  else
    realnode=0
    echo "[test] not root: skipping the real node's tests (-m realnode; run \`make realnode\` as root)" >&2
  fi
fi
if [ "$node" = real ] && [ "$(id -u)" != 0 ]; then
  echo "[test] E2E_NODE=real needs root (the real node)" >&2
  exit 1
fi

if [ "$node" = real ]; then
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
fi

pid=
if [ "$realnode" = 1 ]; then
  log=$(mktemp -t agentchain-realnode.XXXXXX.log)
  echo "[test] the real node's tests run beside the others; their output: $log" >&2
  if [ "$node" = real ]; then
    e2e/controlplane/lane-ns.sh "$python" -m pytest -m realnode --durations=15 "$@" \
      >"$log" 2>&1 &
  else
    bash e2e/controlplane/build-binaries.sh node >/dev/null || exit 1
    bash e2e/controlplane/build-binaries.sh netpol >/dev/null || exit 1
    # On a shared machine another run may hold the real-node lock: wait for it, not fail.
    AGENTCHAIN_REALNODE_WAIT=${AGENTCHAIN_REALNODE_WAIT:-1800} \
      "$python" -m pytest -m realnode --durations=15 "$@" >"$log" 2>&1 &
  fi
  pid=$!
fi

main_env=()
if [ "$node" = real ]; then main_env=(AGENTCHAIN_E2E_NODE=real); fi
env "${main_env[@]}" "$python" -m pytest -m 'not realnode' -n "$workers" --dist loadfile \
  --durations=30 "$@"
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
