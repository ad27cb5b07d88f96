"""Only the operator's own pods finish an AgentJob (issue 14), on the real control plane.

Aspects covered:
- a pod anyone creates with a running AgentJob's labels (agentjob, attempt, job-name)
  that exits 0 does not end the job, nor one whose controller reference names the
  job's batch Job with a made-up uid: the AgentJob stays Running with its real pod;
- the real pod, controlled by the batch Job the operator created, then ends it as usual.
"""

from __future__ import annotations

from typing import Any

from agentchain import models
from agentchain.hop.rules.jobspec import CONTAINER_NAME
from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

SLOW = "import time; time.sleep(20); print('the real agent finished')"


def _rogue(
    info: ClusterInfo, name: str, job: str, owner_refs: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    labels = {
        models.AGENTJOB_LABEL: job,
        models.ATTEMPT_LABEL: "1",
        "job-name": job,
        "batch.kubernetes.io/job-name": job,
    }
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if owner_refs is not None:
        meta["ownerReferences"] = owner_refs
    # An image the node has, so the rogue pod really runs and exits 0: the session's
    # agent image on the real node (no registry), busybox on a cluster that pulls.
    image = info.agent_image or "busybox:1.36"
    container = {"name": CONTAINER_NAME, "image": image, "command": ["true"]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }


def _pod_phase(info: ClusterInfo, namespace: str, pod: str) -> str | None:
    found = operating.get_json(
        info, "pods", "-n", namespace, "--field-selector", f"metadata.name={pod}"
    )
    items = found["items"]
    return str((items[0].get("status") or {}).get("phase")) if items else None


def test_a_pod_with_the_jobs_labels_does_not_end_it(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    agent = chaining.ai_agent("slow", chaining.python_command(SLOW))
    job = {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {"name": "real-1"},
        "spec": {"agentRole": "slow", "prompt": "take your time"},
    }
    chaining.apply(info, namespace, agent, job)
    real_pod = chaining.wait_phase(info, namespace, "real-1", "Running", timeout=60)["podName"]
    forged = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "real-1",
        "uid": "00000000-0000-0000-0000-000000000001",
        "controller": True,
    }
    chaining.apply(info, namespace, _rogue(info, "rogue-labels", "real-1"))
    chaining.apply(info, namespace, _rogue(info, "rogue-owner", "real-1", [forged]))
    operating.wait_until(
        lambda: _pod_phase(info, namespace, "rogue-labels") == "Succeeded",
        timeout=60,
        what="the rogue pod to exit 0",
    )

    # The operator's pod watch delivers the rogue pod's end like the real one's: it
    # would have acted within this time (a hop takes well under a second here).
    def untouched() -> bool:
        status = chaining.job_status(info, namespace, "real-1")
        assert status.get("phase") == "Running", status
        assert status.get("podName") == real_pod, status
        return True

    operating.stays(untouched, seconds=3, what="real-1 untouched by the rogue pods")
    status = chaining.wait_phase(info, namespace, "real-1", timeout=120)
    assert status["phase"] == "Succeeded" and status["podName"] == real_pod, status
    assert "the real agent finished" in status["result"]
