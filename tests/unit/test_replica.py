"""One replica's start-up decisions (``replica.py``) that need no cluster.

Aspects covered: ``agentchain run`` with an election timing that could let two leaders
act at once (lease not longer than the renew deadline) exits 2 at once, before touching
Kubernetes or Redis, saying why; the Lease's namespace is the configured one, else the
pod's own (its service account's), else ``default``; the identity is the configured one,
else ``<hostname>_<pid>``; without leader election there is no elector at all; the
elector gets the configured Lease and timing.  (The election itself runs against the
real API server: ``e2e/test_electing.py``, ``e2e/test_ha.py``.)
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agentchain import replica
from agentchain.kube.rules.leadership import Timing
from agentchain.settings import Settings


def test_an_unsafe_timing_refuses_to_start() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agentchain", "run", "--leader-election-lease-seconds", "7"],
        env={**os.environ, "KUBECONFIG": "/nonexistent", "AGENTCHAIN_OPERATOR_KEY": "k"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "must exceed the renew deadline" in result.stderr


def test_lease_namespace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mounted = tmp_path / "namespace"
    monkeypatch.setattr(replica, "SERVICE_ACCOUNT_NAMESPACE", mounted)
    assert replica.lease_namespace(Settings()) == "default"
    mounted.write_text("agentchain-system\n")
    assert replica.lease_namespace(Settings()) == "agentchain-system"
    assert replica.lease_namespace(Settings(leader_election_namespace="ops")) == "ops"


def test_identity() -> None:
    assert replica.identity(Settings()) == f"{socket.gethostname()}_{os.getpid()}"
    assert replica.identity(Settings(leader_election_identity="pod-0")) == "pod-0"


def test_the_elector_follows_the_settings() -> None:
    assert replica.elector_for(Settings(leader_election=False)) is None
    config = Settings(
        leader_election_namespace="ops",
        leader_election_name="lease",
        leader_election_identity="pod-0",
        leader_election_lease_seconds=15,
        leader_election_renew_deadline_seconds=10,
        leader_election_retry_seconds=2,
    )
    elector = replica.elector_for(config)
    assert elector is not None
    assert (elector.namespace, elector.name, elector.identity) == ("ops", "lease", "pod-0")
    assert elector.timing == Timing(15, 10, 2)
    assert not elector.fence()  # Nobody leads before a campaign.


async def test_a_clean_stop_drains_unready_and_a_second_signal_cuts_it_short() -> None:
    drained = replica.Replica(Settings(leader_election=False, shutdown_drain_seconds=0.3))
    assert drained.role() == "follower"
    loop = asyncio.get_running_loop()
    started = loop.time()
    draining = asyncio.create_task(drained._drain())
    await asyncio.sleep(0.05)
    assert drained.role() == "stopping"  # /readyz answers 503 meanwhile.
    await draining
    assert 0.3 <= loop.time() - started < 2.0
    hurried = replica.Replica(Settings(leader_election=False, shutdown_drain_seconds=60))
    draining = asyncio.create_task(hurried._drain())
    await asyncio.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)  # The drain's own handler takes it.
    await asyncio.wait_for(draining, 5)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.remove_signal_handler(sig)
    undrained = replica.Replica(Settings(leader_election=False, shutdown_drain_seconds=0))
    await asyncio.wait_for(undrained._drain(), 0.5)
    assert undrained.role() == "follower"
