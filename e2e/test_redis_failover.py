"""A Redis Sentinel failover while chains run (issue 20), on the real control plane.

The operator (its own ServiceAccount, the session operator paused) reaches Redis only
through ``redis+sentinel://``: a primary, a replica and a Sentinel from Debian's
``redis-server`` (``e2e/controlplane/redissentinel.py``).  While chains run, the primary
is SIGKILLed; the Sentinel promotes the replica.

Aspects covered:
- the operator reconnects on its own: the same process runs before and after, never
  restarted, and the replica it now writes to is the Sentinel's new primary;
- nothing is lost or doubled: every chain completes with exactly its three jobs, one
  batch Job and one pod each, every transition and one ChainComplete Event per chain
  (``chaos._count``), and every job's full output is still retrievable through the job
  API afterwards (captures written before the failover were replicated).
"""

from __future__ import annotations

import json
import time
import urllib.request

import kubernetes
import pytest

from e2e import chaos, operating
from e2e.controlplane.cluster import ClusterInfo
from e2e.controlplane.redissentinel import SentinelGroup

CHAINS = 6
# After this long, the first jobs of the chains are running: the failover lands mid-chain.
FAILOVER_AFTER_SECONDS = 3.0


def _output(op: operating.OperatorProcess, namespace: str, name: str) -> dict[str, object]:
    request = urllib.request.Request(
        f"{op.url}/api/jobs/{namespace}/{name}/output",
        headers={"Authorization": f"Bearer {op.admin_token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        answer: dict[str, object] = json.load(resp)
    return answer


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.usefixtures("operator_paused")
def test_chains_survive_a_sentinel_failover(
    installed: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    info = installed
    with SentinelGroup(info.workdir / f"sentinel-{namespace}") as group:
        env = {"AGENTCHAIN_REDIS_URL": group.url, "AGENTCHAIN_NAMESPACES": namespace}
        op = operating.OperatorProcess(
            info,
            operating.operator_kubeconfig(info, info.workdir / f"{namespace}.kubeconfig"),
            extra_env=env,
            name=f"sentinel-{namespace}",
        )
        op.start()
        try:
            kc = chaos._Cluster(kube_api, namespace)
            sleeps = dict.fromkeys(chaos.AGENTS, 1.5)
            for manifest in chaos.agent_manifests(sleeps):
                kc.create("aiagents", manifest)
            for i in range(CHAINS):
                kc.create("agentjobs", chaos.root_job(f"sentinel-{i}"))
            time.sleep(FAILOVER_AFTER_SECONDS)
            pid = op.process.pid if op.process else None
            assert chaos.completed(kc.agentjobs()) < CHAINS  # Chains are in flight.
            took = group.fail_over()
            chaos._wait_complete(kc, CHAINS, time.monotonic() + 180)

            def no_problems() -> bool:
                report = chaos.ChaosReport(chains=CHAINS, kills=0, sleeps=sleeps)
                chaos._count(kc, report)
                assert not report.problems, report.summary()
                return True

            # Two resyncs: a duplicate either of them made shows as a problem at once.
            operating.stays(
                no_problems, seconds=2 * chaos.RESYNC_SECONDS + 1, interval=1, what="a clean count"
            )
            report = chaos.ChaosReport(chains=CHAINS, kills=0, sleeps=sleeps)
            chaos._count(kc, report)
            assert not report.problems, report.summary()
            assert report.agentjobs == report.batch_jobs == report.pods == 3 * CHAINS
            assert report.completed_chains == report.chain_complete_events == CHAINS
            assert op.process is not None and op.process.pid == pid and op.process.alive()
            assert group.primary_port() == group.replica.port, f"failover took {took:.1f}s"
            for job in kc.agentjobs():
                output = _output(op, namespace, job["metadata"]["name"])
                assert chaos.REPORT_HEADER in str(output.get("output")), output
        finally:
            op.stop()
