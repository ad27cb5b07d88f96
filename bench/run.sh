#!/usr/bin/env bash
# `make bench-figures`: every bench script, on the real node, in a lane of its own.
#
# The benches start clusters on the real node (bench/node.py), which needs root. They run
# in one lane (e2e/controlplane/lane-ns.sh: network and mount namespaces of their own)
# inside one machine session (`realnode_lanes hold`), as `make test` runs
# its real nodes: so `make bench` runs beside a `make test` whose real nodes are in lanes
# too, never on their bridge or fixed paths, and the machine is compared once at the end
# (a difference fails the run). A real node outside any lane (`python -m e2e.controlplane
# up`, or a test run alone) holds the machine alone: the session waits for it up to
# AGENTCHAIN_REALNODE_WAIT seconds (default here 1800), as `make test` does.
#
# A lane has no network, so binaries and images are built first (cached: seconds).
#
# Usage: bench/run.sh [--inside] <jobs...>   (AGENTCHAIN_BENCH_TABLE names the table file)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=${PYTHON:-python3}

if [ "${1:-}" = --inside ]; then
  shift
  # The scale benches last: cloning a backlog of 20,000 can take an hour on a busy
  # machine, and an interrupted run keeps every row written before it.
  "$python" bench/bench_throughput.py
  "$python" bench/bench_store.py
  "$python" bench/bench_webhook.py
  "$python" bench/bench_webhook_memory.py
  "$python" bench/bench_hop_latency.py
  for n in "$@"; do "$python" bench/bench_scale.py --jobs "$n"; done
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "[bench] the benchmarks run on the real node (kubelet, containerd), which needs root: run \`make bench\` as root" >&2
  exit 1
fi
bash e2e/controlplane/build-binaries.sh all >/dev/null
bash e2e/controlplane/build-binaries.sh node >/dev/null
bash e2e/controlplane/build-binaries.sh netpol >/dev/null
"$python" -m e2e.controlplane.realnode_lanes prebuild
AGENTCHAIN_REALNODE_WAIT=${AGENTCHAIN_REALNODE_WAIT:-1800} \
  exec "$python" -m e2e.controlplane.realnode_lanes hold -- \
  e2e/controlplane/lane-ns.sh bash "$0" --inside "$@"
