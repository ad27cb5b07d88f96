"""Context isolation and hand-off on the real control plane (SPEC §5, seeds 001 and 002).

Aspects covered:
- dependsOn: C waits for A and B and gets exactly their results, nothing of D's;
- a job without dependencies gets no prior context;
- memoryScope: all — a coordinator that depends on a two-job chain gets every result of that
  chain under `### <title> (by <agent>)` headings, and nothing of another chain;
- a parent's `## Downstream Directives` section is handed on instead of its raw output;
- a missing completion marker fails an exit-0 job with CompletionMarkerMissing.
"""

from __future__ import annotations

from typing import Any

from agentchain.core.rules import naming
from agentchain.prompts.rules.assembly import CHAIN_RESULTS_HEADING
from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo


def _job(name: str, agent: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {"name": name},
        "spec": {"agentRole": agent, "prompt": f"task for {name}", **spec},
    }


def _prompt(info: ClusterInfo, namespace: str, name: str) -> str:
    return chaining.prompt_of(
        info, namespace, {"status": chaining.job_status(info, namespace, name)}
    )


def test_depends_on_sees_only_its_dependencies(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(
        info,
        namespace,
        chaining.ai_agent(
            "worker-a", chaining.demo_command("--no-context", "--say", "RESULT-FROM-A")
        ),
        chaining.ai_agent(
            "worker-b", chaining.demo_command("--no-context", "--say", "RESULT-FROM-B")
        ),
        chaining.ai_agent(
            "worker-d", chaining.demo_command("--no-context", "--say", "RESULT-FROM-D")
        ),
        chaining.ai_agent("synth", chaining.demo_command("--no-context")),
    )
    chaining.apply(
        info,
        namespace,
        _job("job-c", "synth", dependsOn=["job-a", "job-b"], type="synthesis"),
        _job("job-a", "worker-a", type="analysis-a"),
        _job("job-b", "worker-b", type="analysis-b"),
        _job("job-d", "worker-d"),
    )
    for name in ("job-a", "job-b", "job-d"):
        chaining.wait_phase(info, namespace, name, "Succeeded")
    chaining.wait_phase(info, namespace, "job-c", "Succeeded")
    prompt = _prompt(info, namespace, "job-c")
    assert "### analysis-a (by worker-a)" in prompt
    assert "### analysis-b (by worker-b)" in prompt
    assert "RESULT-FROM-A" in prompt and "RESULT-FROM-B" in prompt
    assert "RESULT-FROM-D" not in prompt
    # No dependencies: nothing from anyone.
    assert "RESULT-FROM" not in _prompt(info, namespace, "job-d").replace("RESULT-FROM-D", "")
    assert _prompt(info, namespace, "job-a") == "task for job-a"


def test_memory_scope_all_gets_every_result_of_its_chain(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    scout = chaining.ai_agent(
        "scout",
        chaining.demo_command("--no-context", "--say", "RESULT-OF-SCOUT"),
        triggers=[{"source": "manual", "next": {"agentTriggerName": "fixer"}}],
    )
    chaining.apply(
        info,
        namespace,
        scout,
        chaining.ai_agent(
            "fixer", chaining.demo_command("--no-context", "--say", "RESULT-OF-FIXER")
        ),
        chaining.ai_agent(
            "outsider", chaining.demo_command("--no-context", "--say", "RESULT-OF-OUTSIDER")
        ),
        chaining.ai_agent("coordinator", chaining.demo_command("--no-context")),
    )
    chaining.apply(
        info,
        namespace,
        _job("scout-1", "scout", type="investigation"),
        _job("outsider-1", "outsider", type="investigation"),
    )
    operating.wait_until(
        lambda: chaining.job_status(info, namespace, "scout-1").get("chainId"),
        timeout=60,
        what="the chain id of scout-1",
    )
    chain_id = chaining.job_status(info, namespace, "scout-1")["chainId"]
    fixer = naming.child_name("scout-1", "fixer")
    assert chaining.wait_phase(info, namespace, "outsider-1", "Succeeded")["chainId"] != chain_id
    # Only an AgentJob written by hand can ask for memoryScope: all (a chain step cannot),
    # and only the operator places a job in a chain: the coordinator reaches the chain
    # through its dependencies, and memoryScope: all covers their chains.
    coordinator = _job(
        "coord-1", "coordinator", type="synthesis", memoryScope="all", dependsOn=["scout-1", fixer]
    )
    chaining.apply(info, namespace, coordinator)
    assert (
        chaining.wait_phase(info, namespace, "coord-1", "Succeeded", "Failed")["phase"]
        == "Succeeded"
    )
    assert chaining.job_status(info, namespace, fixer)["chainId"] == chain_id
    prompt = _prompt(info, namespace, "coord-1")
    assert prompt.count(CHAIN_RESULTS_HEADING) == 1
    scout_at = prompt.index("### investigation (by scout)\n")
    fixer_at = prompt.index("### investigation (by fixer)\n")
    assert scout_at < prompt.index("RESULT-OF-SCOUT") < fixer_at < prompt.index("RESULT-OF-FIXER")
    assert prompt.count("RESULT-OF-SCOUT") == prompt.count("RESULT-OF-FIXER") == 1
    assert "RESULT-OF-OUTSIDER" not in prompt and "(by outsider" not in prompt
    assert prompt.endswith("task for coord-1")


def test_downstream_directives_are_handed_on(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    parent = chaining.ai_agent(
        "planner",
        chaining.demo_command(
            "--no-context",
            "--say",
            "noise that the child must not see",
            "--say",
            "## Downstream Directives",
            "--say",
            "- fix LoginForm first",
        ),
        triggers=[{"source": "manual", "next": {"agentTriggerName": "doer"}}],
    )
    chaining.apply(
        info, namespace, parent, chaining.ai_agent("doer", chaining.demo_command("--no-context"))
    )
    chaining.apply(info, namespace, _job("plan-1", "planner"))
    chaining.wait_phase(info, namespace, "plan-1", "Succeeded")
    child = chaining.job_status(info, namespace, "plan-1")["next"][0]["child"]
    chaining.wait_phase(info, namespace, child, "Succeeded")
    prompt = _prompt(info, namespace, child)
    block = prompt.split("</chain-context>")[0]
    assert "- fix LoginForm first" in block
    assert "noise that the child must not see" not in block


def test_missing_completion_marker_fails_the_job(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(
        info,
        namespace,
        chaining.ai_agent(
            "strict", chaining.demo_command("--no-context"), completionMarker="TRIAGE_COMPLETE"
        ),
        chaining.ai_agent(
            "strict-ok",
            chaining.demo_command("--no-context", "--say", "TRIAGE_COMPLETE"),
            completionMarker="TRIAGE_COMPLETE",
        ),
    )
    chaining.apply(info, namespace, _job("strict-1", "strict"), _job("strict-2", "strict-ok"))
    failed = chaining.wait_phase(info, namespace, "strict-1", "Succeeded", "Failed")
    assert failed["phase"] == "Failed"
    assert failed["reason"] == "CompletionMarkerMissing"
    assert failed["exitCode"] == 0
    assert (
        chaining.wait_phase(info, namespace, "strict-2", "Succeeded", "Failed")["phase"]
        == "Succeeded"
    )
