"""Retries on the real control plane (SPEC §6, seed 004): a retried attempt's prompt
carries its anchor.

Aspects covered:
- an agent with ``backoffLimit: 2`` writes its anchor through the job API with its own
  token on attempt 1 and exits 3; attempt 2 is a new batch Job (``<name>-a2``) whose
  ``AGENT_PROMPT`` carries that anchor, and it succeeds: the job records attempt 2,
  one ``Retrying`` Warning Event, and exactly two batch Jobs;
- an agent that always fails with ``backoffLimit: 1`` ends Failed after two attempts,
  never a third;
- a job that never fails runs exactly one batch Job with attempt 1.
"""

from __future__ import annotations

from typing import Any

from agentchain import models
from agentchain.hop.rules import jobspec
from agentchain.prompts.rules.assembly import ANCHOR_HEADING
from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

# Attempt 1 records its progress in its anchor and fails; a later attempt succeeds only
# if its prompt carries that progress.  Standard library only: it runs as a host process.
RESUMER = """
import json, os, sys, urllib.request
attempt = int(os.environ["AGENT_ATTEMPT"])
prompt = os.environ["AGENT_PROMPT"]
print(f"attempt {attempt}")
if attempt == 1:
    anchor = {"task": "fix the flaky test", "status": "in_progress",
              "progress": ["found the race in the lock"], "keyFacts": ["locks are per object"]}
    url = "{}/api/jobs/{}/{}/anchor".format(
        os.environ["AGENT_API_URL"], os.environ["AGENT_NAMESPACE"], os.environ["AGENT_JOB"])
    request = urllib.request.Request(
        url, data=json.dumps(anchor).encode(), method="PUT",
        headers={"Authorization": "Bearer " + os.environ["AGENT_TOKEN"],
                 "Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=10).read()
    print("anchored; failing on purpose")
    sys.exit(3)
resumed = "found the race in the lock" in prompt
print("resumed from the anchor" if resumed else "no anchor in the prompt")
sys.exit(0 if resumed else 4)
"""


def _job(name: str, agent: str) -> dict[str, Any]:
    return {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {"name": name},
        "spec": {"agentRole": agent, "prompt": f"task for {name}"},
    }


def _batch_jobs(info: ClusterInfo, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    found = operating.get_json(
        info, "jobs", "-n", namespace, "-l", f"{models.AGENTJOB_LABEL}={name}"
    )
    items: list[dict[str, Any]] = found["items"]
    return {item["metadata"]["name"]: item for item in items}


def _prompt(info: ClusterInfo, namespace: str, batch: dict[str, Any]) -> str:
    return chaining.batch_secret(info, namespace, batch)[jobspec.PROMPT_KEY]


def _reasons(info: ClusterInfo, namespace: str, name: str) -> list[str]:
    events = operating.get_json(
        info, "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}"
    )
    return [e.get("reason", "") for e in events["items"]]


def test_a_retried_attempt_resumes_from_its_anchor(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    chaining.apply(
        info,
        namespace,
        chaining.ai_agent("resumer", chaining.python_command(RESUMER), backoffLimit=2),
    )
    chaining.apply(info, namespace, _job("resume-1", "resumer"))
    status = chaining.wait_phase(info, namespace, "resume-1")
    assert status["phase"] == "Succeeded", status
    assert status["attempt"] == 2 and status["jobName"] == "resume-1-a2", status
    batches = _batch_jobs(info, namespace, "resume-1")
    assert sorted(batches) == ["resume-1", "resume-1-a2"]
    first = _prompt(info, namespace, batches["resume-1"])
    second = _prompt(info, namespace, batches["resume-1-a2"])
    assert ANCHOR_HEADING not in first
    assert second.count(ANCHOR_HEADING) == 1
    assert "found the race in the lock" in second and "locks are per object" in second
    assert second.endswith("task for resume-1")  # The task itself is unchanged.
    assert all(b["spec"]["backoffLimit"] == 0 for b in batches.values())
    logs = info.kubectl("logs", "job/resume-1-a2", "-n", namespace).stdout
    assert "resumed from the anchor" in logs, logs
    assert status["result"].rstrip().endswith("resumed from the anchor")
    assert _reasons(info, namespace, "resume-1").count("Retrying") == 1


def test_retries_stop_at_the_backoff_limit(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    failing = ["agentchain", "demo-agent", "--no-context", "--exit-code", "5"]
    steady = ["agentchain", "demo-agent", "--no-context"]
    chaining.apply(
        info,
        namespace,
        chaining.ai_agent("flaky", failing, backoffLimit=1),
        chaining.ai_agent("steady", steady, backoffLimit=0),
    )
    chaining.apply(info, namespace, _job("flaky-1", "flaky"), _job("steady-1", "steady"))
    status = chaining.wait_phase(info, namespace, "flaky-1")
    assert status["phase"] == "Failed" and status["exitCode"] == 5, status
    assert status["attempt"] == 2, status
    assert sorted(_batch_jobs(info, namespace, "flaky-1")) == ["flaky-1", "flaky-1-a2"]
    steady_status = chaining.wait_phase(info, namespace, "steady-1")
    assert steady_status["phase"] == "Succeeded" and steady_status["attempt"] == 1
    assert sorted(_batch_jobs(info, namespace, "steady-1")) == ["steady-1"]
