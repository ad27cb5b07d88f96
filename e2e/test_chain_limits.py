"""Chain limits and broken references end to end (SPEC §1 and §2, seed 003's troubleshooting).

Aspects covered:
- A → B → A is refused: the second A is a Failed record with reason
  ``LoopDetected``, a message naming the path and a Warning Event; it never runs;
- an 11-long chain of distinct agents is refused at the 11th job with
  ``MaxChainDepthExceeded`` (10 jobs ran);
- the limit is configurable: an operator with ``AGENTCHAIN_MAX_CHAIN_JOBS=3``
  refuses the 4th job (the session operator is stopped meanwhile, so only that
  operator acts on the namespace);
- a ``next`` naming a missing or a disabled agent: ``Ready=False`` with
  ``NextAgentNotFound`` / ``NextAgentDisabled`` and a Warning Event on the AiAgent;
  the root job still ends and the refusal is a Failed AgentJob with that reason;
  no operator Traceback; creating the missing agent flips Ready back to True;
- a root AgentJob naming no agent fails with ``AgentNotFound``.
"""

from __future__ import annotations

from typing import Any

from e2e import chaining, operating
from e2e.chaining import agent, root_job, step
from e2e.controlplane.cluster import ClusterInfo

# Longer than the session operator's resync interval (AGENTCHAIN_RESYNC_SECONDS=3).
RESYNC_WAIT_SECONDS = 4.5


def _line(prefix: str, count: int) -> list[dict[str, Any]]:
    """Agents prefix0 → prefix1 → … → prefix<count-1>, all distinct and quiet."""
    names = [f"{prefix}{i}" for i in range(count)]
    return [
        agent(name, "--no-context", next_=step(nxt) if nxt else None)
        for name, nxt in zip(names, [*names[1:], None], strict=True)
    ]


def _assert_refused(job: dict[str, Any], reason: str) -> None:
    status = job["status"]
    assert status["phase"] == "Failed", status
    assert status["reason"] == reason, status
    assert "jobName" not in status  # A refusal is a record, never a run.


def test_loop_is_refused(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(
        info,
        namespace,
        agent("ai-loop-a", "--no-context", next_=step("ai-loop-b")),
        agent("ai-loop-b", "--no-context", next_=step("ai-loop-a")),
    )
    chaining.apply(info, namespace, root_job("loop", "ai-loop-a"))
    first, second, refused = chaining.wait_chain(info, namespace, "loop", 3)
    assert [first["status"]["phase"], second["status"]["phase"]] == ["Succeeded", "Succeeded"]
    assert refused["spec"]["agentRole"] == "ai-loop-a"
    _assert_refused(refused, "LoopDetected")
    assert "ai-loop-a → ai-loop-b → ai-loop-a" in refused["status"]["message"]
    assert second["status"]["next"][0]["action"] == "refused"
    name = refused["metadata"]["name"]
    assert chaining.has_event(info, namespace, name, "Warning", "LoopDetected")
    assert len(chaining.batch_job_names(info, namespace)) == 2

    # The chain is complete once, on the refusal record, and stays so: a resync
    # must not mark the refused job's parent complete as well.
    def complete_once() -> bool:
        jobs = chaining.chain_jobs(info, namespace, refused["status"]["chainId"])
        complete = [j["metadata"]["name"] for j in jobs if j["status"].get("chainComplete")]
        assert complete == [name]
        return True

    operating.stays(complete_once, seconds=RESYNC_WAIT_SECONDS, what="one complete record")


def test_eleventh_job_exceeds_max_chain_depth(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(info, namespace, *_line("a", 12))
    chaining.apply(info, namespace, root_job("deep", "a0"))
    jobs = chaining.wait_chain(info, namespace, "deep", 11, timeout=240)
    assert [j["spec"]["agentRole"] for j in jobs] == [f"a{i}" for i in range(11)]
    assert all(j["status"]["phase"] == "Succeeded" for j in jobs[:10])
    _assert_refused(jobs[10], "MaxChainDepthExceeded")
    assert jobs[10]["status"]["chainDepth"] == 10
    assert "a9 → a10" in jobs[10]["status"]["message"]
    assert len(chaining.batch_job_names(info, namespace)) == 10


def test_max_chain_jobs_is_configurable(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    # The session operator watches every namespace and has no way to leave one
    # out, so it is stopped while an operator limited to this namespace runs.
    operator.stop()
    limited = operating.OperatorProcess(
        info,
        operator.kubeconfig,
        extra_env={"AGENTCHAIN_MAX_CHAIN_JOBS": "3", "AGENTCHAIN_NAMESPACES": namespace},
        name="limited-operator",
    )
    try:
        limited.start()
        chaining.apply(info, namespace, *_line("b", 5))
        chaining.apply(info, namespace, root_job("short", "b0"))
        jobs = chaining.wait_chain(info, namespace, "short", 4)
        assert [j["status"]["phase"] for j in jobs[:3]] == ["Succeeded"] * 3
        _assert_refused(jobs[3], "MaxChainDepthExceeded")
        assert "of at most 3" in jobs[3]["status"]["message"]
        assert len(chaining.batch_job_names(info, namespace)) == 3
        assert "Traceback" not in limited.log_text()
    finally:
        limited.stop()
        operator.start()


def test_next_naming_missing_or_disabled_agent(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    log_start = len(operator.log_text())
    chaining.apply(
        info,
        namespace,
        agent("ai-dangling", "--no-context", next_=step("ai-ghost")),
        agent("ai-to-off", "--no-context", next_=step("ai-off")),
        agent("ai-off", "--no-context", enabled=False),
    )
    expected = {"ai-dangling": "NextAgentNotFound", "ai-to-off": "NextAgentDisabled"}

    def ready(name: str) -> dict[str, Any] | None:
        obj = operating.get_json(info, "aiagent", name, "-n", namespace)
        return chaining.condition(obj, "Ready")

    for name, reason in expected.items():
        operating.wait_until(
            lambda n=name, r=reason: (ready(n) or {}).get("reason") == r,
            timeout=30,
            what=f"{name} Ready=False/{reason}",
        )
        assert (ready(name) or {})["status"] == "False"
        operating.wait_until(  # Emitted just after the condition is written.
            lambda n=name, r=reason: chaining.has_event(info, namespace, n, "Warning", r),
            timeout=30,
            what=f"{name}'s Warning Event {reason}",
        )

    chaining.apply(
        info,
        namespace,
        root_job("dangling", "ai-dangling"),
        root_job("to-off", "ai-to-off"),
        root_job("orphan", "ai-nobody"),
    )
    for root, reason in (("dangling", "NextAgentNotFound"), ("to-off", "NextAgentDisabled")):
        parent, refused = chaining.wait_chain(info, namespace, root, 2)
        assert parent["status"]["phase"] == "Succeeded"
        _assert_refused(refused, reason)
        assert chaining.has_event(info, namespace, refused["metadata"]["name"], "Warning", reason)
    (orphan,) = chaining.wait_chain(info, namespace, "orphan", 1)
    assert orphan["status"]["phase"] == "Failed"
    assert orphan["status"]["reason"] == "AgentNotFound"
    assert "Traceback" not in operator.log_text()[log_start:]

    # The missing agent appears: the agent naming it is re-evaluated to Ready.
    chaining.apply(info, namespace, agent("ai-ghost", "--no-context"))
    operating.wait_until(
        lambda: (ready("ai-dangling") or {}).get("status") == "True",
        timeout=30,
        what="ai-dangling Ready=True once ai-ghost exists",
    )
    assert (ready("ai-to-off") or {}).get("reason") == "NextAgentDisabled"
