"""Pod and batch Job events, from the operator's own watches: the moment an agent's
container ends, reconcile its AgentJob (``hop.reconciling``).

The watches select by the AgentJob label (kopf could not: nolar/kopf#1311) and keep
only what the engine reads (:func:`trim_pod`, :func:`trim_job`).  Each event first
feeds the indexes the hop reads an attempt from (``Runtime.pods``, ``Runtime.jobs``),
then is decided from the watched objects alone before any I/O: a settled AgentJob's
pod or Job has nothing left to do (a restart with 5,000 finished jobs used to replay
each: two AgentJob reads, a pod list and a log read), nor has a running pod whose
AgentJob already says it runs there, a pod whose agent neither runs nor ended, or a
Job not ended.  What is left names its AgentJob: the reconcile reads the rest.
"""

from __future__ import annotations

from typing import Any

from agentchain import models
from agentchain.core.runtime import Runtime
from agentchain.handlers.ordering import Submit
from agentchain.hop import attempts, reconciling
from agentchain.kube.watching import key_of
from agentchain.workspaces import publishing
from agentchain.workspaces.rules import jobmounts

Obj = dict[str, Any]
METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
    "ownerReferences",
)


def _metadata(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    return {k: meta[k] for k in METADATA if k in meta}


def trim_pod(pod: Obj) -> Obj:
    """Identity, owner, phase and each container's state: what ``hop.attempts`` reads."""
    status = pod.get("status") or {}
    trimmed: Obj = {"phase": status["phase"]} if "phase" in status else {}
    for key in ("containerStatuses", "initContainerStatuses"):  # A workspace job's agent
        if key in status:  # runs as an init container.
            trimmed[key] = [
                {"name": cs.get("name"), "state": cs.get("state") or {}} for cs in status[key]
            ]
    trimmed.setdefault("containerStatuses", [])
    return {"metadata": _metadata(pod), "status": trimmed}


def trim_job(job: Obj) -> Obj:
    """Identity, owner and final conditions: what ``hop.attempts`` reads."""
    conditions = [
        {k: c.get(k) for k in ("type", "status", "reason")}
        for c in (job.get("status") or {}).get("conditions") or []
    ]
    return {"metadata": _metadata(job), "status": {"conditions": conditions}}


def ended(job: Obj) -> bool:
    """Whether the batch Job has its final condition (Complete or Failed)."""
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _owner(obj: Obj) -> tuple[str, str | None]:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    return str(meta.get("namespace") or ""), labels.get(models.AGENTJOB_LABEL)


def pod_changed(rt: Runtime, submit: Submit, kind: str, pod: Obj) -> None:
    namespace, owner = _owner(pod)
    if not owner or rt.unsettled.is_settled(namespace, owner):
        return
    if kind == "DELETED":
        rt.pods.gone(pod)
        return
    rt.pods.seen(pod)
    name = str(pod["metadata"].get("name"))
    if not attempts.speaks(pod):
        return
    if attempts.terminated_state(pod) is None and rt.unsettled.running_in(namespace, owner, name):
        return
    submit(("pods", *key_of(pod)), lambda: reconciling.reconcile(rt, namespace, owner))


def job_changed(rt: Runtime, submit: Submit, kind: str, job: Obj) -> None:
    labels = (job.get("metadata") or {}).get("labels") or {}
    if jobmounts.WORKSPACE_LABEL in labels:  # A chain's publish Job, not an attempt.
        if kind != "DELETED" and ended(job):
            submit(("jobs", *key_of(job)), lambda: publishing.on_job(rt, job))
        return
    namespace, owner = _owner(job)
    if owner and rt.unsettled.is_settled(namespace, owner):
        return
    # Indexed now, not in the task: a pod listed next finds its Job without a read.
    if kind == "DELETED":
        rt.jobs.gone(job)
    else:
        rt.jobs.seen(job)
    if not owner:
        return
    name = str(job["metadata"].get("name"))
    if kind == "DELETED":
        rt.unsettled.job_gone(namespace, owner, name)
        return
    rt.unsettled.job_watched(namespace, owner, name, ended=ended(job))
    if attempts.job_ended(job) is not None:
        submit(("jobs", *key_of(job)), lambda: reconciling.reconcile(rt, namespace, owner))
