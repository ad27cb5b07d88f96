"""Whether a pod or batch Job is the one the operator runs for an AgentJob.

Labels are not proof: anyone who may create pods in a namespace can put an
AgentJob's label on a pod and exit 0.  A pod counts only when its *controller*
ownerReference names a batch Job by uid and that Job, as the API server has it,
is the Job the operator names for that AgentJob (``naming.attempt_job_name``
for the Job's attempt), carries the same AgentJob label and is controlled by that
AgentJob (its controller ownerReference; the operator creates every batch Job with
it, so a Job without one, e.g. made by someone else under the right name, never
speaks for a job; ``hop.attempts`` also checks the reference's uid against the
AgentJob's).  The API server
keeps names unique, so the uid ties the pod to that one Job; the Job controller
itself trusts the same reference.

These are the pure halves; ``core.podowners`` looks the Job up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentchain import models
from agentchain.core.rules import naming

Obj = dict[str, Any]


@dataclass(frozen=True)
class JobRef:
    """A batch Job as a pod's controller reference names it."""

    name: str
    uid: str


def controller_job(pod: Obj) -> JobRef | None:
    """The batch Job that controls ``pod`` according to its ownerReferences, if any."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if not isinstance(ref, dict) or ref.get("controller") is not True:
            continue
        if ref.get("apiVersion") == "batch/v1" and ref.get("kind") == "Job":
            name, uid = ref.get("name"), ref.get("uid")
            if isinstance(name, str) and isinstance(uid, str) and name and uid:
                return JobRef(name, uid)
        return None  # At most one controller: another kind controls this pod.
    return None


def controller_agentjob(job: Obj) -> JobRef | None:
    """The AgentJob that controls the batch Job ``job``, by its ownerReferences."""
    for ref in (job.get("metadata") or {}).get("ownerReferences") or []:
        if not isinstance(ref, dict) or ref.get("controller") is not True:
            continue
        if ref.get("apiVersion") == models.API_VERSION and ref.get("kind") == "AgentJob":
            name, uid = ref.get("name"), ref.get("uid")
            if isinstance(name, str) and isinstance(uid, str) and name and uid:
                return JobRef(name, uid)
        return None
    return None


def attempt_of(obj: Obj) -> int:
    """The attempt a batch Job or pod runs (label; Jobs from before retries: 1)."""
    raw = ((obj.get("metadata") or {}).get("labels") or {}).get(models.ATTEMPT_LABEL, "1")
    try:
        return max(1, int(raw))
    except (TypeError, ValueError):
        return 1


def runs(job: Obj, agentjob: str) -> bool:
    """Whether the batch Job ``job`` is the one the operator names for ``agentjob``."""
    meta = job.get("metadata") or {}
    if (meta.get("labels") or {}).get(models.AGENTJOB_LABEL) != agentjob:
        return False
    owner = controller_agentjob(job)
    if owner is None or owner.name != agentjob:
        return False
    return meta.get("name") == naming.attempt_job_name(agentjob, attempt_of(job))


def pod_refusal(pod: Obj, job: Obj | None, agentjob: str) -> str | None:
    """Why ``pod`` may not speak for ``agentjob`` (None: it may); ``job`` is the Job its
    controller reference names, as read from the API server (None: no such Job)."""
    ref = controller_job(pod)
    if ref is None:
        return "it has no batch Job as its controller"
    if job is None:
        return f"its controller, batch Job {ref.name}, does not exist"
    if (job.get("metadata") or {}).get("uid") != ref.uid:
        return f"its controller reference does not carry batch Job {ref.name}'s uid"
    if not runs(job, agentjob):
        return f"batch Job {ref.name} does not run AgentJob {agentjob}"
    return None
