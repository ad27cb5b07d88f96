"""``python -m e2e.controlplane up``: the local cluster for the demo and for poking at.

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
import secrets
import signal
import sys
from types import FrameType

from e2e.controlplane.cluster import cluster, say


def _interrupt(signum: int, frame: FrameType | None) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def up() -> int:
    """Bring the cluster up, print how to reach it, and hold it until interrupted."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    with cluster() as info:
        print(f"export KUBECONFIG={info.kubeconfig}")
        print(f"export AGENTCHAIN_REDIS_URL={info.redis_url}")
        # The operator refuses to start without a key; a fresh one for this cluster.
        print(f"export AGENTCHAIN_OPERATOR_KEY={secrets.token_hex(32)}")
        print(f"# API server {info.server}; kubectl is in {info.bin_dir or 'PATH'}")
        print("# Ctrl-C stops the cluster and removes its workdir", flush=True)
        # Inside the with block: being stopped is this command's normal end, so the
        # harness sees a clean exit and removes the workdir. An interrupt during
        # start-up propagates instead, and the harness keeps the logs.
        try:
            while True:
                signal.pause()
        except KeyboardInterrupt:
            say("interrupted")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.controlplane",
        description="The local Kubernetes control plane, node and Redis (SPEC §9).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("up", help="start everything and wait until Ctrl-C")
    args = parser.parse_args(argv)
    if args.command == "up":
        return up()
    parser.error(f"unknown command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
