"""What the pod and batch Job watches say about an attempt: running, or how it ended.

:func:`observe` reads the attempt an AgentJob names from the watches' indexes
(``core.podowners``: its batch Job, its pods), whatever event brought the caller
(``hop.reconciling``) here: a pod whose agent container ``terminated`` ends the
attempt (its exit code, and the pod to read output from); a batch Job with a final
condition ends it too when no pod's end is in the index (its pod event missed), or
says why no output is left (pod gone).  A running pod of a job still ``Pending`` is
:class:`Running`.  Only a batch Job missing from the index (a Job the watch has not
shown yet) is read, and the Job's pods are listed only when it ended and the index
holds no pod's end.

A deadline is the Job controller's to enforce: it marks the Job (``FailureTarget``,
reason ``DeadlineExceeded``, then ``Failed`` once the pods are gone) and deletes the
pod, whose own state then speaks for nothing.  The attempt ends at the first of
those marks, from the pod being deleted: its output (what the agent printed until
then) is read while the pod is still there, not after, when nothing is left.

Only the operator's own pods speak for a job, whatever labels a pod carries: the
pod's controller reference must carry the uid of the batch Job the operator names
for the AgentJob, and that Job must be controlled by this AgentJob
(``core.rules.ownedby``).
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import Any

from agentchain.core import statuswriting
from agentchain.core.hopstate import Exit
from agentchain.core.rules import ownedby as policy_ownership
from agentchain.core.runtime import Runtime
from agentchain.hop.rules.jobspec import CONTAINER_NAME
from agentchain.kube import apierrors, resources, workloads
from agentchain.models.agentjob import AgentJobStatus
from agentchain.models.conditions import Reason
from agentchain.prompts import teamkeeping
from agentchain.traces.rules.steps import PodMoments
from agentchain.workspaces.rules import jobmounts

log = logging.getLogger(__name__)
Obj = dict[str, Any]
attempt_of = policy_ownership.attempt_of


@dataclass(frozen=True)
class Running:
    """The attempt's agent runs in ``pod`` and the job does not say so yet."""

    pod: str


class Read:
    """Only a request can tell how the attempt is doing."""


READ = Read()


def _states(pod: Obj, key: str) -> dict[str, Obj]:
    statuses = (pod.get("status") or {}).get(key) or []
    return {str(cs.get("name")): dict(cs.get("state") or {}) for cs in statuses}


def terminated_state(pod: Obj) -> Obj | None:
    """The agent container's ``terminated`` state once its attempt has ended.

    A workspace job's agent is an init container (``workspaces/rules/jobmounts.py``): its attempt
    ends when it exits non-zero (the report never runs), or when the report after it
    ended too.  A ``workspace-prepare`` that failed ends it with ``prepareFailed``.
    """
    main = _states(pod, "containerStatuses")
    if CONTAINER_NAME in main:
        terminated = main[CONTAINER_NAME].get("terminated")
        return dict(terminated) if terminated else None
    init = _states(pod, "initContainerStatuses")
    prepared = (init.get(jobmounts.PREPARE) or {}).get("terminated")
    if prepared and prepared.get("exitCode") != 0:
        return {"exitCode": None, "prepareFailed": prepared.get("exitCode")}
    agent = (init.get(CONTAINER_NAME) or {}).get("terminated")
    if not agent:
        return None
    reported = (main.get(jobmounts.REPORT) or {}).get("terminated")
    return dict(agent) if agent.get("exitCode") != 0 or reported else None


def _agent_running(pod: Obj) -> bool:
    if (pod.get("status") or {}).get("phase") == "Running":
        return True
    agent = _states(pod, "initContainerStatuses").get(CONTAINER_NAME) or {}
    return "running" in agent


def _pod_exit(pod: Obj, terminated: Obj, attempt: int, batch_uid: str, owner: str) -> Exit:
    """The attempt's end from its pod's ``terminated_state``."""
    if "prepareFailed" in terminated:
        lost = (
            f"The workspace could not be prepared: container {jobmounts.PREPARE} of pod "
            f"{pod['metadata']['name']} exited with code {terminated['prepareFailed']} "
            "(its log says why); the agent did not run."
        )
        prepared = _exit_code({"exitCode": terminated["prepareFailed"]})
        return Exit(
            attempt,
            None,
            None,
            lost=lost,
            batch_uid=batch_uid,
            owner_uid=owner,
            prepare_exit=prepared,
            moments=moments_of(pod),
        )
    code = _exit_code(terminated)
    name = pod["metadata"]["name"]
    moments = moments_of(pod, terminated)
    return Exit(attempt, code, name, batch_uid=batch_uid, owner_uid=owner, moments=moments)


def moments_of(pod: Obj, terminated: Obj | None = None) -> PodMoments:
    """The pod's timestamps for its attempt's span: created, scheduled, and its agent
    container's start and exit (``terminated``)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    scheduled = next(
        (
            c.get("lastTransitionTime")
            for c in conditions
            if c.get("type") == "PodScheduled" and c.get("status") == "True"
        ),
        None,
    )
    ended = terminated or {}
    return PodMoments(
        created=(pod.get("metadata") or {}).get("creationTimestamp"),
        scheduled=scheduled,
        running=ended.get("startedAt"),
        exited=ended.get("finishedAt"),
    )


def _exit_code(terminated: Obj) -> int | None:
    code = terminated.get("exitCode")
    return int(code) if code is not None else None


def speaks(pod: Obj) -> bool:
    """Whether a pod event may say something about its attempt: its agent runs or
    ended, and the pod is not being deleted (the Job controller killed it: its Job
    says why)."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return False
    return terminated_state(pod) is not None or _agent_running(pod)


async def current(rt: Runtime, namespace: str, name: str) -> Obj | None:
    """The AgentJob as of now: from the watch when that is as of our last write to it
    (one read less per hop), else read."""
    cached = rt.unsettled.current(namespace, name)
    if cached is not None:
        return cached
    return await resources.get(namespace, resources.AGENTJOBS, name)


def look(rt: Runtime, obj: Obj) -> Exit | Running | Read | None:
    """What the indexes alone say of the attempt the launched AgentJob ``obj`` names:
    ended (its pod's exit), running while the job says ``Pending``, nothing to act on
    (None), or ``READ`` when only a request can tell (its Job not indexed, or ended
    with no pod's end indexed)."""
    namespace, name = statuswriting.name_of(obj)
    status = statuswriting.parse(obj).status
    batch = rt.jobs.get(namespace, str(status.job_name))
    if batch is None:
        return READ
    owner = _owner_uid(batch)
    if not policy_ownership.runs(batch, name) or owner != obj["metadata"].get("uid"):
        return None  # Not this AgentJob's (an earlier one of its name, or anyone's).
    if attempt_of(batch) < (status.attempt or 1):
        return None  # An earlier attempt's Job: that attempt was retried already.
    pods = _pods_of(rt, batch, name)
    ended = next(((p, t) for p in reversed(pods) if (t := terminated_state(p))), None)
    if ended is not None:
        uid = batch["metadata"]["uid"]
        return _pod_exit(ended[0], ended[1], attempt_of(batch), uid, owner)
    if job_ended(batch) is not None:
        return READ  # Its pod's end was missed: its pods are listed.
    running = next((p for p in reversed(pods) if _agent_running(p)), None)
    if running is not None and status.phase in (None, "Pending"):
        return Running(str(running["metadata"]["name"]))
    return None


async def observe(rt: Runtime, obj: Obj) -> Exit | Running | None:
    """:func:`look`, reading what the indexes cannot tell: the Job (its absence ends
    the attempt with no output), or its pods once it ended."""
    seen = look(rt, obj)
    if not isinstance(seen, Read):
        return seen
    namespace, _ = statuswriting.name_of(obj)
    status = statuswriting.parse(obj).status
    job_name = str(status.job_name)
    batch = rt.jobs.get(namespace, job_name)
    if batch is None:
        batch = await workloads.get_job(namespace, job_name)
        if batch is None:
            lost = f"Batch Job {job_name} disappeared before the operator saw it end."
            return Exit(status.attempt or 1, None, None, lost=lost)
        rt.jobs.seen(batch)
        seen = look(rt, obj)
        if not isinstance(seen, Read):
            return seen
    how = job_ended(batch)
    assert how is not None
    return await _exit_of(batch, how)


def _pods_of(rt: Runtime, batch: Obj, name: str) -> list[Obj]:
    """The pods of ``batch`` in the index, oldest first, not being deleted; a pod
    labelled for the job that its Job does not control is ignored (and said, when it
    claims to have ended: a pod anyone created)."""
    meta = batch["metadata"]
    found = []
    for pod in rt.pods.of(meta["namespace"], name):
        refusal = policy_ownership.pod_refusal(pod, batch, name)
        if refusal is None:
            if not (pod.get("metadata") or {}).get("deletionTimestamp"):
                found.append(pod)
            continue
        ref = policy_ownership.controller_job(pod)
        if terminated_state(pod) and (ref is None or ref.name == meta["name"]):
            pod_name = pod["metadata"].get("name")
            log.warning(
                "Pod %s/%s is labelled for AgentJob %s but %s: its state is ignored",
                meta["namespace"],
                pod_name,
                name,
                refusal,
            )
    found.sort(key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""))
    return found


def _controlled_by(pod: Obj, job_uid: str) -> bool:
    ref = policy_ownership.controller_job(pod)
    return ref is not None and ref.uid == job_uid


def _owner_uid(job: Obj) -> str:
    owner = policy_ownership.controller_agentjob(job)
    return owner.uid if owner is not None else ""


async def mark_running(
    rt: Runtime, namespace: str, name: str, pod_name: str, obj: Obj | None = None
) -> None:
    """``Running``, only over ``Pending``: written at the version it was read at
    (``obj``, as the caller has it, else as of now), so an end written meanwhile by
    anyone (a stop in another process) is never undone."""
    obj = copy.deepcopy(obj) if obj is not None else await current(rt, namespace, name)
    for _ in range(3):
        if obj is None or (obj.get("status") or {}).get("phase") not in (None, "Pending"):
            return
        status = AgentJobStatus(
            phase="Running",
            reason=Reason.RUNNING,
            message=f"Pod {pod_name} is running.",
            pod_name=pod_name,
            start_time=statuswriting.now(),
        )
        try:
            await rt.writes.patch(obj, status, at_version=True)
        except apierrors.Conflict:
            obj = await resources.get(namespace, resources.AGENTJOBS, name)
            continue
        await teamkeeping.job(rt, obj)
        return


def job_ended(job: Obj) -> str | None:
    """'Complete' or the failure reason once the batch Job has a final condition, or
    ``DeadlineExceeded`` as soon as the Job controller decided it (``FailureTarget``):
    its pod is still there to read output from, and will not be for long."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") != "True":
            continue
        kind, reason = cond.get("type"), cond.get("reason")
        if kind == "Complete":
            return "Complete"
        if kind == "Failed":
            return str(reason or "Failed")
        if kind == "FailureTarget" and reason == Reason.DEADLINE_EXCEEDED:
            return Reason.DEADLINE_EXCEEDED
    return None


async def _exit_of(job: Obj, ended: str) -> Exit:
    """How the Job's attempt ended: its newest terminated pod's exit, else why none; a
    deadline's, from its newest pod, being deleted (its output is read from there)."""
    meta = job["metadata"]
    attempt, uid, owner = attempt_of(job), meta["uid"], _owner_uid(job)
    deadline = ended == Reason.DEADLINE_EXCEEDED
    pods = await workloads.list_pods(meta["namespace"], f"job-name={meta['name']}")
    # Only this Job's: an earlier Job of the same name may still have pods being deleted.
    pods = [p for p in pods if _controlled_by(p, uid) and (deadline or terminated_state(p))]
    pods.sort(key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""))
    if pods and deadline:
        killed = str(pods[-1]["metadata"]["name"])
        moments = moments_of(pods[-1])
        return Exit(attempt, None, killed, True, batch_uid=uid, owner_uid=owner, moments=moments)
    if pods:
        return _pod_exit(pods[-1], terminated_state(pods[-1]) or {}, attempt, uid, owner)
    lost = f"The batch Job ended ({ended}) and no pod was left to read output from."
    return Exit(attempt, None, None, deadline, lost, batch_uid=uid, owner_uid=owner)
