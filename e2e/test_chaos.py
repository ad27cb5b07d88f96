"""Exactly once under SIGKILL, in the reduced form CI runs (SPEC §2; ``e2e/chaos.py``).

Aspects covered (all counted by ``run_chaos``, see its module docstring):
- every chain completes although the operator is killed mid-flight again and again;
- no AgentJob, batch Job or pod is created twice, and no agent prints its report twice;
- no transition is lost: each parent records the child it spawned, each chain is marked
  complete once, with one ChainComplete Event on its last job.

The session's operator is the one killed and restarted, so no second operator ever
watches the namespace; it is left running for the tests that follow.
"""

from __future__ import annotations

import pytest

from e2e import chaos, operating
from e2e.controlplane.cluster import ClusterInfo

CHAINS = 8
KILLS = 8
SEED = 4


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_chains_survive_sigkill(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    report = chaos.run_chaos(
        cluster_info,
        namespace,
        chains=CHAINS,
        kills=KILLS,
        seed=SEED,
        operator=operator,
        timeout=180,
    )
    assert report.kills == KILLS
    assert report.chains >= CHAINS  # One more is started when a kill would meet none.
    chains = report.chains
    assert report.agentjobs == report.batch_jobs == report.pods == 3 * chains
    assert report.reports_printed == 3 * chains
    assert report.spawned_transitions == 2 * chains
    assert report.completed_chains == report.chain_complete_events == chains
