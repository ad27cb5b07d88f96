"""Learnings reach an agent's first run in a chain exactly once, across a crash (SPEC §5).

Aspects covered, on the real control plane with the operator under its ServiceAccount:
- the operator SIGKILLed at the ``learnings-claimed`` crashpoint (claim recorded, prompt
  not yet built) leaves no batch Job; restarted without it, the same job runs in one
  batch Job whose prompt starts with the learnings, which appear in it (and in what the
  agent echoes) exactly once — neither lost nor doubled;
- a second run of the agent in the same chain gets none. The operator never starts
  an agent twice in a chain through ``next`` (LoopDetected), but a delegation may:
  the learner's child delegates back to it with its job token, so the delegated job is
  ``learner → helper → learner`` in the same chain;
- the agent's first run in another chain gets them again.

The session's operator is the one restarted with the crashpoint (as ``test_chaos``
does), so no second operator ever watches the namespace; it is left running.
"""

from __future__ import annotations

import json
import signal
import urllib.request
from typing import Any

import pytest

from agentchain.hop.rules.jobspec import TOKEN_SECRET_KEY
from agentchain.prompts.rules.assembly import LEARNINGS_HEADING
from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]
LESSON = "L-H-001 - Rerun the flaky login test before blaming the change"
CONFIG_MAP = "learner-learnings"
TIMEOUT = 90.0
# The helper sleeps long enough for the test to delegate with its token while it runs
# (the token is revoked when the job ends); nothing waits for it to finish.
HELPER_SLEEP_SECONDS = 30


def _agents() -> list[Obj]:
    learner = chaining.agent(  # Echoes its prompt.
        "learner", next_=chaining.step("helper"), learnings={"configMapName": CONFIG_MAP}
    )
    helper = chaining.agent("helper", "--no-context", "--sleep", str(HELPER_SLEEP_SECONDS))
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP},
        "data": {"heuristics.md": f"## INDEX\n- {LESSON}\n"},
    }
    return [config_map, learner, helper]


def _delegate(info: ClusterInfo, op: operating.OperatorProcess, namespace: str, caller: str) -> Obj:
    """What the caller's agent would do: POST /api/jobs with its own job token."""
    job = chaining.find_job(info, namespace, caller)
    token = chaining.job_secret(info, namespace, job)[TOKEN_SECRET_KEY]
    body = json.dumps({"agentRole": "learner", "task": "double-check the fix"}).encode()
    request = urllib.request.Request(
        f"{op.url}/api/jobs",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 201
        answer: Obj = json.loads(response.read())
    return answer


@pytest.mark.timeout(300)
def test_learnings_once_per_chain_across_a_crash(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(info, namespace, *_agents())

    code = operator.crash_at(
        "learnings-claimed",
        lambda: chaining.apply(info, namespace, chaining.root_job("learn-1", "learner")),
        timeout=TIMEOUT,
    )
    assert code == -signal.SIGKILL
    # The claim was recorded and the process died before the prompt existed.
    try:
        assert chaining.batch_jobs(info, namespace) == []
        assert "jobName" not in chaining.job_status(info, namespace, "learn-1")
    finally:
        operator.start()

    first = chaining.wait_job(info, namespace, "learn-1", timeout=TIMEOUT)
    assert first["status"]["phase"] == "Succeeded", first["status"]
    assert len(chaining.batch_jobs(info, namespace, "learn-1")) == 1
    prompt = chaining.prompt_of(info, namespace, first)
    assert prompt.startswith(LEARNINGS_HEADING)
    assert prompt.count(LESSON) == 1 and prompt.count(LEARNINGS_HEADING) == 1
    assert chaining.output_of(info, namespace, first).count(LESSON) == 1

    # The same agent again in the same chain, by delegation from its running child.
    # status.next is written just after the child starts, so it may trail the phase.
    operating.wait_until(
        lambda: chaining.job_status(info, namespace, "learn-1").get("next"),
        timeout=TIMEOUT,
        what="learn-1's status.next",
    )
    helper = chaining.job_status(info, namespace, "learn-1")["next"][0]["child"]
    operating.wait_until(
        lambda: chaining.job_status(info, namespace, helper).get("jobName"),
        timeout=TIMEOUT,
        what=f"{helper} to run (its token Secret exists by then)",
    )
    delegated = _delegate(info, operator, namespace, helper)
    assert delegated["chainId"] == first["status"]["chainId"]
    assert delegated["chainPath"] == ["learner", "helper", "learner"]
    # Meanwhile, the agent's first run in another chain.
    chaining.apply(info, namespace, chaining.root_job("learn-3", "learner"))

    second = chaining.wait_job(info, namespace, delegated["id"], timeout=TIMEOUT)
    assert second["status"]["phase"] == "Succeeded", second["status"]
    assert LESSON not in chaining.prompt_of(info, namespace, second)
    assert LEARNINGS_HEADING not in chaining.prompt_of(info, namespace, second)
    assert LESSON not in chaining.output_of(info, namespace, second)

    other = chaining.wait_job(info, namespace, "learn-3", timeout=TIMEOUT)
    assert other["status"]["chainId"] != first["status"]["chainId"]
    assert chaining.prompt_of(info, namespace, other).count(LESSON) == 1
    assert len(chaining.batch_jobs(info, namespace, "learn-1")) == 1
