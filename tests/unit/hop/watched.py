"""What the watches would have shown a process about an ended attempt, for unit tests.

The hop reads an attempt from the watches' indexes (``Runtime.jobs``, ``Runtime.pods``)
whatever event brings it there (``hop.reconciling``).  A test that starts a hop "from
a pod event" therefore puts the attempt's batch Job and its ended pod in those
indexes, as the batch Job and pod watches of a process started just now would (they
list both before any event is handled), then reconciles the AgentJob.
"""

from __future__ import annotations

from typing import Any

from agentchain import models
from agentchain.core.hopstate import Exit
from agentchain.core.runtime import Runtime
from agentchain.hop import reconciling
from agentchain.hop.rules.jobspec import CONTAINER_NAME
from agentchain.kube import resources

Obj = dict[str, Any]


async def pod_ended(rt: Runtime, namespace: str, name: str, exit: Exit) -> None:
    """Show ``rt`` the attempt of AgentJob ``name`` ended as ``exit`` says (its pod's
    agent container terminated with ``exit.exit_code``), and reconcile the job."""
    obj = await resources.get(namespace, resources.AGENTJOBS, name)
    assert obj is not None, f"no AgentJob {name} to end the attempt of"
    show(rt, obj, exit)
    await reconciling.reconcile(rt, namespace, name)


def show(rt: Runtime, obj: Obj, exit: Exit | None) -> None:
    """Put the attempt of AgentJob ``obj`` in ``rt``'s watch indexes: its batch Job
    (running) and its pod, whose agent container runs, or ended as ``exit`` says."""
    namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    status = obj.get("status") or {}
    job_name = str(status.get("jobName") or name)
    batch_uid = (exit.batch_uid if exit else "") or f"{job_name}-uid"
    attempt = exit.attempt if exit else int(status.get("attempt") or 1)
    owner = {
        "apiVersion": models.API_VERSION,
        "kind": "AgentJob",
        "name": name,
        "uid": obj["metadata"]["uid"],
        "controller": True,
    }
    labels = {models.AGENTJOB_LABEL: name, models.ATTEMPT_LABEL: str(attempt)}
    meta = {"name": job_name, "namespace": namespace, "uid": batch_uid, "labels": labels}
    rt.jobs.seen({"metadata": {**meta, "ownerReferences": [owner]}})
    controller = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job_name,
        "uid": batch_uid,
        "controller": True,
    }
    state: Obj = {"running": {}}
    if exit is not None:
        ended: Obj = {"exitCode": exit.exit_code}
        if exit.moments.running:
            ended["startedAt"] = exit.moments.running
        state = {"terminated": ended}
    pod = {
        "metadata": {
            "name": (exit.pod if exit else None) or f"{job_name}-pod",
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [controller],
        },
        "status": {
            "phase": "Succeeded" if exit else "Running",
            "containerStatuses": [{"name": CONTAINER_NAME, "state": state}],
        },
    }
    rt.pods.seen(pod)
