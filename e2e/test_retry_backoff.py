"""Retry backoff on the real control plane (issue 16).

Aspects covered:
- ``retry.backoff`` (base 2 s, factor 2): attempt 2 starts at least 2 s after attempt 1's
  container ended and attempt 3 at least 4 s after attempt 2's, not much later either
  (asserted from the times the attempts' containers printed); meanwhile the job shows
  phase Pending, reason Retrying and ``retryAt``; it ends Failed at attempt 3;
- the wait survives a SIGKILL of the operator during it: the attempt still runs, once;
- ``retry.exitCodes`` limits retries to those codes: another code ends the job at once.
"""

from __future__ import annotations

import itertools
from typing import Any

from agentchain import models
from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]
FAILING = (
    "import sys, time; print('start %.6f' % time.time(), flush=True); time.sleep(0.2); "
    "print('end %.6f' % time.time()); sys.exit({code})"
)
SLACK_SECONDS = 5.0
"""Launching a batch Job and starting its pod, on a loaded machine."""


BACKOFF = {"backoff": {"baseSeconds": 2, "factor": 2, "maxSeconds": 30}}


def _times(info: ClusterInfo, namespace: str, batch: str) -> tuple[float, float]:
    out = info.kubectl("logs", f"job/{batch}", "-n", namespace).stdout
    stamps = dict(line.split() for line in out.splitlines() if line.startswith(("start", "end")))
    return float(stamps["start"]), float(stamps["end"])


def _batches(info: ClusterInfo, namespace: str, name: str) -> list[str]:
    found = operating.get_json(
        info, "jobs", "-n", namespace, "-l", f"{models.AGENTJOB_LABEL}={name}"
    )
    return sorted(j["metadata"]["name"] for j in found["items"])


def _gaps(info: ClusterInfo, namespace: str, name: str) -> list[float]:
    times = [_times(info, namespace, b) for b in (name, f"{name}-a2", f"{name}-a3")]
    return [later[0] - earlier[1] for earlier, later in itertools.pairwise(times)]


def test_attempts_wait_their_exponential_backoff(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    failing = chaining.python_command(FAILING.format(code=3))
    agent = chaining.ai_agent("backer", failing, backoffLimit=2, retry=BACKOFF)
    chaining.apply(info, namespace, agent)
    chaining.apply(info, namespace, chaining.root_job("back-1", "backer"))
    operating.wait_until(
        lambda: chaining.job_status(info, namespace, "back-1").get("retryAt") is not None,
        timeout=60,
        what="a retry to be scheduled",
    )
    waiting = chaining.job_status(info, namespace, "back-1")
    assert (waiting["phase"], waiting["reason"], waiting["attempt"]) == ("Pending", "Retrying", 2)
    status = chaining.wait_phase(info, namespace, "back-1")
    assert (status["phase"], status["attempt"], status["exitCode"]) == ("Failed", 3, 3), status
    assert _batches(info, namespace, "back-1") == ["back-1", "back-1-a2", "back-1-a3"]
    first, second = _gaps(info, namespace, "back-1")
    assert 2.0 <= first < 2.0 + SLACK_SECONDS, first
    assert 4.0 <= second < 4.0 + SLACK_SECONDS, second


def test_a_backoff_survives_an_operator_restart(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    slow = {"backoff": {"baseSeconds": 6, "factor": 1, "maxSeconds": 30}}
    failing = chaining.python_command(FAILING.format(code=3))
    agent = chaining.ai_agent("patient", failing, backoffLimit=2, retry=slow)
    chaining.apply(info, namespace, agent)
    chaining.apply(info, namespace, chaining.root_job("back-2", "patient"))
    operating.wait_until(
        lambda: chaining.job_status(info, namespace, "back-2").get("retryAt") is not None,
        timeout=60,
        what="a retry to be scheduled",
    )
    operator.kill()
    operator.start()
    status = chaining.wait_phase(info, namespace, "back-2")
    assert (status["phase"], status["attempt"]) == ("Failed", 3), status
    assert _batches(info, namespace, "back-2") == ["back-2", "back-2-a2", "back-2-a3"]
    first, second = _gaps(info, namespace, "back-2")
    assert 6.0 <= first and 6.0 <= second, (first, second)


def test_exit_codes_limit_what_is_retried(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    failing = chaining.python_command(FAILING.format(code=2))
    agent = chaining.ai_agent(
        "picky", failing, backoffLimit=2, retry={**BACKOFF, "exitCodes": [75]}
    )
    chaining.apply(info, namespace, agent)
    chaining.apply(info, namespace, chaining.root_job("back-3", "picky"))
    status = chaining.wait_phase(info, namespace, "back-3")
    assert (status["phase"], status["attempt"], status["exitCode"]) == ("Failed", 1, 2), status
    assert _batches(info, namespace, "back-3") == ["back-3"]
