"""Chains end to end on the real control plane (SPEC §2, seed 003).

Aspects covered:
- seed 003's Issue → Fix → Review chain: ids, depths, parents, paths, prompts;
- the exact <chain-context> block (with the parent's echoed tags neutralised);
- `kubectl get agentjobs -l labrats.work/chain-id=` printer columns.
(Cutting to 4,000 characters is covered in test_chain_policies.py.)
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "config" / "samples" / "labrats.work_v1alpha1_aiagent_issue-fix-review.yaml"


def _root_job(name: str, agent: str, prompt: str = "Fix the login bug") -> dict[str, Any]:
    return {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {"name": name},
        "spec": {
            "agentRole": agent,
            "type": "triage-issue",
            "prompt": prompt,
            "origin": "github",
            "event": {"source": "github", "name": "issues", "action": "opened"},
        },
    }


def _jobs(info: ClusterInfo, namespace: str, selector: str) -> list[dict[str, Any]]:
    out = info.kubectl("get", "agentjobs", "-n", namespace, "-l", selector, "-o", "json")
    items: list[dict[str, Any]] = json.loads(out.stdout)["items"]
    return sorted(items, key=lambda j: (j.get("status") or {}).get("chainDepth", 0))


def _chain_done(info: ClusterInfo, namespace: str, chain_id: str, count: int) -> Any:
    def check() -> list[dict[str, Any]] | None:
        jobs = _jobs(info, namespace, f"labrats.work/chain-id={chain_id}")
        done = [j for j in jobs if (j.get("status") or {}).get("chainComplete")]
        return jobs if len(jobs) == count and done else None

    return check


def _prompt_of(info: ClusterInfo, namespace: str, job: dict[str, Any]) -> str:
    return chaining.prompt_of(info, namespace, job)


def _output(info: ClusterInfo, namespace: str, job: dict[str, Any]) -> str:
    return info.kubectl("logs", f"job/{job['status']['jobName']}", "-n", namespace).stdout


def test_issue_fix_review_chain(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    info.kubectl("apply", "-n", namespace, "-f", str(SAMPLE))
    info.kubectl(
        "apply", "-n", namespace, "-f", "-", input=json.dumps(_root_job("issue-42", "ai-triage"))
    )
    root = {}

    def root_chain() -> str | None:
        nonlocal root
        root = operating.get_json(info, "agentjob", "issue-42", "-n", namespace)
        chain_id = (root.get("status") or {}).get("chainId")
        return str(chain_id) if chain_id is not None else None

    operating.wait_until(root_chain, timeout=60, what="root job chain id")
    chain_id = str(root["status"]["chainId"])
    check = _chain_done(info, namespace, chain_id, 3)
    operating.wait_until(check, timeout=120, what="three-job chain to complete")
    jobs = check()
    assert jobs is not None
    assert [j["spec"]["agentRole"] for j in jobs] == ["ai-triage", "ai-developer", "ai-reviewer"]
    for depth, job in enumerate(jobs):
        status = job["status"]
        assert status["phase"] == "Succeeded", status
        assert status["chainId"] == chain_id
        assert status["chainDepth"] == depth
        assert status["chainPath"] == ["ai-triage", "ai-developer", "ai-reviewer"][: depth + 1]
        assert status["exitCode"] == 0
        if depth:
            parent = jobs[depth - 1]
            assert status["parentJobId"] == parent["metadata"]["name"]
            # The parent echoed its own prompt, so its output holds chain-context
            # tags; inside the child's block they must arrive neutralised.
            raw = _output(info, namespace, parent).rstrip("\n")
            inert = raw.replace("</chain-context>", "\u2039/chain-context>").replace(
                "<chain-context>", "\u2039chain-context>"
            )
            expected_block = (
                "<chain-context>\nPrevious agent output:\n" + inert + "\n</chain-context>\n\n"
            )
            assert _prompt_of(info, namespace, job).count("</chain-context>") == 1
            assert _prompt_of(info, namespace, job).startswith(expected_block)
        else:
            assert status.get("parentJobId") is None
        # No kopf bookkeeping on AgentJobs: no finalizer (deleting one never waits for
        # the operator) and no diff-base annotation, writes the engine never reads.
        meta = job["metadata"]
        assert not meta.get("finalizers"), meta
        assert not [a for a in meta.get("annotations") or {} if a.startswith("kopf.")], meta
    assert jobs[-1]["status"]["chainComplete"] is True
    table = info.kubectl(
        "get", "agentjobs", "-n", namespace, "-l", f"labrats.work/chain-id={chain_id}"
    )
    header = table.stdout.splitlines()[0].split()
    assert header == ["NAME", "AGENT", "PHASE", "CHAIN", "DEPTH", "PARENT", "EXIT", "AGE"]
    assert len(table.stdout.splitlines()) == 4
    _check_team_anchor(operator, namespace, chain_id, jobs)


def _check_team_anchor(
    operator: operating.OperatorProcess, namespace: str, chain_id: str, jobs: list[Any]
) -> None:
    """SPEC §6: the operator keeps the chain's team anchor, readable through the API."""
    anchor = chaining.team_anchor(operator, namespace, chain_id)
    names = [j["metadata"]["name"] for j in jobs]
    assert anchor["chainId"] == chain_id
    assert list(anchor["jobs"]) == names
    assert {n: e["phase"] for n, e in anchor["jobs"].items()} == dict.fromkeys(names, "Succeeded")
    assert [(h["from"], h["to"]) for h in anchor["handoffs"]] == list(itertools.pairwise(names))
    assert "escalations" not in anchor
    assert [(d["job"], d["action"]) for d in anchor["decisions"]] == [(names[-1], "none")]
    assert anchor["complete"] == {
        "outcome": "succeeded",
        "lastJob": names[-1],
        "at": anchor["complete"]["at"],
    }
