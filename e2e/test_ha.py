"""Two operator replicas on the real control plane (issue 20), in the reduced form CI runs.

Both replicas are ``python -m agentchain run`` processes under the operator's own
ServiceAccount, sharing one leader-election Lease (``e2e/chaos_ha.py``; run it as a
module for the long figures).  The session operator serves every namespace, so it is
paused meanwhile: only the two replicas act on the test's namespace.

Aspects covered:
- the leader SIGKILLed, and frozen with SIGSTOP then woken while the new leader acts,
  during running chains: the other replica leads within 15 s each time; a woken old
  leader exits by itself (status 1); every chain completes with no duplicate and no lost
  AgentJob, batch Job, pod, report, transition or ChainComplete Event; no chain pauses
  20 s or more between a job's end and its child's start;
- a leader stopped cleanly (SIGTERM, as in a rolling update) lets its handlers in
  flight finish, then releases the Lease: the other replica leads at its next try, not
  when a lease would have lapsed, and a chain started just before completes;
- signed deliveries sent to both replicas at once, a tenth of them twice (to the other
  replica), the leader SIGKILLed midway and the unanswered ones resent: every delivery
  yields exactly one AgentJob, none twice, none for anything else;
- a rolling update (each replica SIGTERMed in turn and replaced, a Service that learns
  readiness a second late, ``e2e/rolling.py``) under a stream of deliveries: every one
  is answered 2xx and yields its AgentJob.
"""

from __future__ import annotations

import time

import kubernetes
import pytest

from e2e import chaos, chaos_deliveries, chaos_ha, operating, replicating, rolling
from e2e.controlplane.cluster import ClusterInfo

CHAINS = 4
FAILOVERS = 4
DELIVERIES = 60


@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.usefixtures("operator_paused", "installed")
def test_chains_survive_leader_crashes_and_freezes(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    report = chaos_ha.run_failovers(
        cluster_info, namespace, chains=CHAINS, failovers=FAILOVERS, seed=7, timeout=360
    )
    print(report.summary())
    assert report.ok, report.summary()
    assert [mode for mode, _ in report.failovers] == ["kill", "stop"] * (FAILOVERS // 2)
    assert report.chaos.agentjobs == report.chaos.batch_jobs == report.chaos.pods == 3 * CHAINS
    assert report.chaos.reports_printed == 3 * CHAINS
    assert report.chaos.completed_chains == report.chaos.chain_complete_events == CHAINS
    assert max(s for _, s in report.failovers) < chaos_ha.FAILOVER_LIMIT_SECONDS
    assert report.longest_pause < chaos_ha.PAUSE_LIMIT_SECONDS


@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.usefixtures("operator_paused", "installed")
def test_deliveries_to_both_replicas_yield_their_jobs_once(
    cluster_info: ClusterInfo, namespace: str
) -> None:
    report = chaos_deliveries.run_deliveries(
        cluster_info, namespace, deliveries=DELIVERIES, share=0.1, seed=3
    )
    print(report.summary())
    assert not report.problems, report.summary()
    assert report.agentjobs == DELIVERIES
    assert report.redeliveries > 0


@pytest.mark.usefixtures("operator_paused", "installed")
def test_a_cleanly_stopped_leader_hands_over_at_once(
    cluster_info: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    kc = chaos._Cluster(kube_api, namespace)
    sleeps = dict.fromkeys(chaos.AGENTS, 1.0)
    with replicating.replicas(cluster_info, namespace) as ops:
        for manifest in chaos.agent_manifests(sleeps):
            kc.create("aiagents", manifest)
        kc.create("agentjobs", chaos.root_job("handover"))
        old = replicating.leader(ops)
        new = next(op for op in ops if op is not old)
        started = time.monotonic()
        old.stop()  # Returns once the process has exited, its Lease released.
        stopped = time.monotonic()
        operating.wait_until(lambda: new.role() == "leader", timeout=30, interval=0.05)
        led = time.monotonic()
        chaos._wait_complete(kc, 1, time.monotonic() + 90)
    # Released: the follower leads at its next try (2 s, jittered), not when a lease
    # would have lapsed (10 s). kopf gives handlers in flight up to 5 s to finish first.
    assert led - stopped < 2.0 * 1.2 + 1.0, f"{led - stopped:.1f}s after the exit"
    assert led - started < 5.0 + 2.0 * 1.2 + 1.0, f"handover took {led - started:.1f}s"


@pytest.mark.slow
@pytest.mark.timeout(360)
@pytest.mark.usefixtures("operator_paused", "installed")
def test_a_rolling_update_refuses_no_delivery(cluster_info: ClusterInfo, namespace: str) -> None:
    report = rolling.run_rolling(cluster_info, namespace, drain=5.0)
    print(report.summary())
    assert report.sent > 50, report.summary()
    assert not report.refused and not report.problems, report.summary()
