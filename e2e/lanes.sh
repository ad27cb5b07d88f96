#!/usr/bin/env bash
# `make test`'s tests, in three lanes at once: the suite on the local control plane in
# $TEST_WORKERS pytest-xdist processes, and beside them the real node's tests
# (`-m realnode`), which need root.
#
# Why beside and not after: the real node's tests mostly wait (for the kubelet, pods,
# helm), so on two cores they add little to the xdist lanes' time, where after them they
# would add all of theirs. They cannot be an xdist worker's share: only one real node can
# run on a machine (realnode.lock), and each of their modules starts its own cluster.
# Their output is kept in a file and printed after the main lanes', so the two do not
# interleave. Either lane failing fails the run.
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

pid=
if [ "$realnode" = 1 ]; then
  # Built (or found cached) before the lanes start, so a cold build's output is not hidden.
  bash e2e/controlplane/build-binaries.sh node >/dev/null || exit 1
  bash e2e/controlplane/build-binaries.sh netpol >/dev/null || exit 1
  log=$(mktemp -t agentchain-realnode.XXXXXX.log)
  echo "[test] the real node's tests run beside the others; their output: $log" >&2
  # On a shared machine another run may hold the one real node: wait for it, not fail.
  AGENTCHAIN_REALNODE_WAIT=${AGENTCHAIN_REALNODE_WAIT:-1800} \
    "$python" -m pytest -m realnode --durations=15 "$@" >"$log" 2>&1 &
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
