"""``python -m e2e.controlplane up``: the local cluster for the demo and for poking at.

It runs on the real node (containerd, kubelet, kube-proxy: ``realnode.py``) with the e2e
agent image (``images/e2e-agent``) built from this tree and imported, so an AiAgent that
names no image runs in it (the operator's default image). The real node needs root:
without it, and without a cluster named by ``AGENTCHAIN_E2E_KUBECONFIG``, ``up`` says so
and exits 2 before starting anything.

``--with-operator`` also installs the CRDs and the operator's RBAC and runs the operator
under its own ServiceAccount, printing the API URL, an admin token and the webhook
secret to reach it with.

This is the same ``cluster()`` the e2e suite uses, held open until the user stops it,
so what the demo runs on is exactly what the tests ran on. SIGTERM is turned into the
same path as Ctrl-C so that ``kill`` or a Makefile stopping the demo also tears the
cluster down in order; once teardown has begun, further signals are ignored so an
impatient second Ctrl-C cannot leave half the components running (a stuck component is
SIGKILLed by the harness after its stop timeout anyway).

The ``export`` lines go to stdout, progress to stderr, so the exports can be copied or
captured without the noise.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from e2e import operating, realnodes
from e2e.controlplane.cluster import (
    NEEDS_ROOT,
    ClusterInfo,
    existing_kubeconfig,
    say,
    stop_on_signals,
)


def up(with_operator: bool = False) -> int:
    """Bring the cluster up, print how to reach it, and hold it until interrupted."""
    if existing_kubeconfig() is None and os.geteuid() != 0:
        say(f"cannot start the cluster: {NEEDS_ROOT} (e.g. `sudo make demo`)")
        return 2
    stop_on_signals()
    with realnodes.cluster_with_agent_image() as info:
        print(f"export KUBECONFIG={info.kubeconfig}")
        print(f"export AGENTCHAIN_REDIS_URL={info.redis_url}")
        # The operator refuses to start without a key; the harness's, so an operator run
        # by hand opens what --with-operator's queued (and the other way round).
        print(f"export AGENTCHAIN_OPERATOR_KEY={operating.OPERATOR_KEY}")
        print(f"# API server {info.server}; kubectl is in {info.bin_dir or 'PATH'}")
        # Inside the with block: being stopped is this command's normal end, so the
        # harness sees a clean exit and removes the workdir. An interrupt during
        # start-up propagates instead, and the harness keeps the logs.
        try:
            if with_operator:
                _hold_with_operator(info)
            else:
                print("# Ctrl-C stops the cluster and removes its workdir", flush=True)
                _hold()
        except KeyboardInterrupt:
            say("interrupted")
    return 0


def _hold() -> None:
    while True:
        signal.pause()


def _hold_with_operator(info: ClusterInfo) -> None:
    say("installing the CRDs and the operator's RBAC; starting the operator")
    with operating.running(info) as op:
        print(f"export AGENTCHAIN_API_URL={op.url}")
        print(f"export AGENTCHAIN_ADMIN_TOKEN={op.admin_token}")
        print(f"export AGENTCHAIN_WEBHOOK_SECRET={op.webhook_secret}")
        print(f"# operator: pid {op.process.pid if op.process else '?'}, under ServiceAccount")
        print(f"#   {operating.SYSTEM_NAMESPACE}/{operating.SERVICE_ACCOUNT}; log in")
        print(f"#   {info.workdir / 'logs'}; webhook at $AGENTCHAIN_API_URL/webhooks/github")
        print(f"# metrics and probes (internal listener): {op.internal_url}/metrics, /readyz")
        print("# try: kubectl create namespace demo && kubectl apply -n demo -f config/samples/")
        print("# Ctrl-C stops the operator, then the cluster, and removes the workdir", flush=True)
        _hold()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.controlplane",
        description="The local Kubernetes control plane, real node and Redis (SPEC §9).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("up", help="start everything and wait until Ctrl-C")
    start.add_argument(
        "--with-operator",
        action="store_true",
        help="also install the CRDs and RBAC and run the operator under its own ServiceAccount",
    )
    args = parser.parse_args(argv)
    if args.command == "up":
        return up(with_operator=args.with_operator)
    parser.error(f"unknown command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
