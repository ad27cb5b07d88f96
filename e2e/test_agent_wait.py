"""A job created before its AiAgent waits for it (SPEC §1, objects applied in any order).

The session operator lets a job wait ``operating.AGENT_WAIT_SECONDS`` for its agent.

Aspects covered:
- a job applied before its AiAgent stays Pending (``WaitingForAgent``) with the
  condition ``AgentFound=False`` (reason ``AgentNotFound``, the triggerName and the
  deadline in its message) and a Normal Event, launches nothing; once the AiAgent is
  applied it runs and Succeeds, ``AgentFound=True``;
- the AiAgent's arrival starts the job, not the resync: with an operator whose resync
  and wait are ten minutes, the job runs within seconds of the agent's apply;
- a job whose agent never comes ends Failed, ``AgentNotFound``, after the wait, not
  before, saying how long it waited, with a Warning Event;
- a job waiting for its agent can be stopped: it ends Cancelled without running;
- a disabled agent ends its job at once (``AgentNotEnabled``): no wait, no
  ``AgentFound`` condition, no ``WaitingForAgent`` Event.
"""

from __future__ import annotations

import time
from typing import Any

from e2e import chaining, operating
from e2e.chaining import agent, root_job
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]


def _job(info: ClusterInfo, namespace: str, name: str) -> Obj:
    return operating.get_json(info, "agentjob", name, "-n", namespace)


def _wait_for_agent(info: ClusterInfo, namespace: str, name: str) -> Obj:
    """The job once its status says it waits for its AiAgent."""
    found: Obj = {}

    def waiting() -> bool:
        nonlocal found
        found = _job(info, namespace, name)
        return (found.get("status") or {}).get("reason") == "WaitingForAgent"

    operating.wait_until(waiting, timeout=30, what=f"{name} waiting for its AiAgent")
    return found


def _assert_waits(info: ClusterInfo, namespace: str, job: Obj, role: str) -> None:
    status = job["status"]
    assert status["phase"] == "Pending", status
    assert "jobName" not in status, status
    assert status["chainId"], status  # Its chain fields were written with the wait.
    found = chaining.condition(job, "AgentFound")
    assert found is not None, status
    assert (found["status"], found["reason"]) == ("False", "AgentNotFound"), found
    assert repr(role) in found["message"] and " until " in found["message"], found
    name = job["metadata"]["name"]
    operating.wait_until(
        lambda: chaining.has_event(info, namespace, name, "Normal", "WaitingForAgent"),
        timeout=30,
        what=f"{name}'s WaitingForAgent Event",
    )
    assert chaining.batch_job_names(info, namespace) == []


def test_a_job_applied_before_its_agent_waits_then_runs(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    log_start = len(operator.log_text())
    chaining.apply(info, namespace, root_job("early", "ai-late"))
    waiting = _wait_for_agent(info, namespace, "early")
    _assert_waits(info, namespace, waiting, "ai-late")

    chaining.apply(info, namespace, agent("ai-late", "--no-context"))
    (done,) = chaining.wait_chain(info, namespace, "early", 1)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    found = chaining.condition(done, "AgentFound")
    assert found is not None and (found["status"], found["reason"]) == ("True", "AgentFound")
    assert "Traceback" not in operator.log_text()[log_start:]


def test_the_agents_arrival_starts_the_job_not_the_resync(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    # The session operator resyncs every 3 s, which would start the job as well; an
    # operator of this namespace alone whose resync is far away shows the wake-up.
    operator.stop()
    slow = operating.OperatorProcess(
        info,
        operator.kubeconfig,
        extra_env={
            "AGENTCHAIN_RESYNC_SECONDS": "600",
            "AGENTCHAIN_AGENT_WAIT_SECONDS": "600",
            "AGENTCHAIN_NAMESPACES": namespace,
        },
        name="slow-resync-operator",
    )
    try:
        slow.start()
        chaining.apply(info, namespace, root_job("woken", "ai-arrives"))
        _wait_for_agent(info, namespace, "woken")
        chaining.apply(info, namespace, agent("ai-arrives", "--no-context"))
        (done,) = chaining.wait_chain(info, namespace, "woken", 1, timeout=90)
        assert done["status"]["phase"] == "Succeeded", done["status"]
        assert "Traceback" not in slow.log_text()
    finally:
        slow.stop()
        operator.start()


def test_a_job_whose_agent_never_comes_ends_agent_not_found_after_the_wait(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    applied = time.monotonic()
    chaining.apply(info, namespace, root_job("lonely", "ai-never"))
    waiting = _wait_for_agent(info, namespace, "lonely")
    _assert_waits(info, namespace, waiting, "ai-never")

    (ended,) = chaining.wait_chain(info, namespace, "lonely", 1)
    # Not before the wait was over (creationTimestamp has whole seconds: one of slack).
    assert time.monotonic() - applied >= operating.AGENT_WAIT_SECONDS - 1
    status = ended["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "AgentNotFound"), status
    assert f"within {operating.AGENT_WAIT_SECONDS} s" in status["message"], status
    found = chaining.condition(ended, "AgentFound")
    assert found is not None and (found["status"], found["reason"]) == ("False", "AgentNotFound")
    operating.wait_until(
        lambda: chaining.has_event(info, namespace, "lonely", "Warning", "AgentNotFound"),
        timeout=30,
        what="lonely's Warning Event AgentNotFound",
    )
    assert chaining.batch_job_names(info, namespace) == []


def test_a_job_waiting_for_its_agent_can_be_stopped(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(info, namespace, root_job("halted", "ai-absent"))
    _wait_for_agent(info, namespace, "halted")
    info.kubectl("annotate", "aj", "halted", "-n", namespace, "labrats.work/stop=true")
    (ended,) = chaining.wait_chain(info, namespace, "halted", 1)
    assert (ended["status"]["phase"], ended["status"]["reason"]) == ("Cancelled", "Stopped")
    assert chaining.batch_job_names(info, namespace) == []


def test_a_disabled_agent_ends_its_job_at_once(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(info, namespace, agent("ai-off", "--no-context", enabled=False))
    chaining.apply(info, namespace, root_job("refused", "ai-off"))
    (ended,) = chaining.wait_chain(info, namespace, "refused", 1)
    status = ended["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "AgentNotEnabled"), status
    assert chaining.condition(ended, "AgentFound") is None
    assert not chaining.has_event(info, namespace, "refused", "Normal", "WaitingForAgent")
