"""What the pod and batch Job watches say about an attempt: running, or how it ended.

The watches are the hop's trigger.  A pod whose agent container ``terminated``
ends its attempt (``hopping.finish`` with the exit code and the pod to read output
from); a batch Job with a final condition ends it too when its pod event was
missed, or says why no output is left (pod gone).  A running pod marks its AgentJob
``Running``.

A deadline is the Job controller's to enforce: it marks the Job (``FailureTarget``,
reason ``DeadlineExceeded``, then ``Failed`` once the pods are gone) and deletes the
pod, whose own events are then no one's to act on.  The attempt ends at the first of
those marks, from the pod being deleted: its output (what the agent printed until
then) is read while the pod is still there, not after, when nothing is left.

Only the operator's own pods speak for a job, whatever labels a pod carries
(``core.podowners``).  A batch Job whose end this process already recorded is
remembered (``Runtime.finished``, by the Job's uid), so the pod and Job updates
that keep coming after the end cost no API call.
"""

from __future__ import annotations

from typing import Any

from agentchain import models
from agentchain.core import podowners, statuswriting
from agentchain.core.hopstate import Exit
from agentchain.core.rules import ownedby as policy_ownership
from agentchain.core.runtime import Runtime
from agentchain.hop import hopping
from agentchain.hop.rules.jobspec import CONTAINER_NAME
from agentchain.kube import apierrors, resources, workloads
from agentchain.models.agentjob import AgentJobStatus
from agentchain.models.conditions import Reason
from agentchain.prompts import teamkeeping
from agentchain.traces.rules.steps import PodMoments
from agentchain.workspaces.rules import jobmounts

Obj = dict[str, Any]
attempt_of = policy_ownership.attempt_of


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


async def on_pod(rt: Runtime, pod: Obj) -> None:
    """A watched pod changed: mark Running, or finish when the agent container ended."""
    meta = pod["metadata"]
    owner = (meta.get("labels") or {}).get(models.AGENTJOB_LABEL)
    ref = policy_ownership.controller_job(pod)
    if not owner or ref is None or (meta["namespace"], ref.uid) in rt.finished:
        return
    terminated = terminated_state(pod)
    running = terminated is None and _agent_running(pod)
    if not (running or terminated) or meta.get("deletionTimestamp"):
        # A pod the Job controller killed (deadline): the Job watcher records why.
        return
    job = await podowners.controlling_job(rt.jobs, pod, owner)
    if job is None:
        return
    if terminated is None:
        await _mark_running(rt, meta["namespace"], owner, meta["name"])
        return
    exit = _pod_exit(pod, terminated, attempt_of(job), ref.uid, _owner_uid(job))
    await hopping.finish(rt, meta["namespace"], owner, ref.uid, exit)


def _controlled_by(pod: Obj, job_uid: str) -> bool:
    ref = policy_ownership.controller_job(pod)
    return ref is not None and ref.uid == job_uid


def _owner_uid(job: Obj) -> str:
    owner = policy_ownership.controller_agentjob(job)
    return owner.uid if owner is not None else ""


async def _mark_running(rt: Runtime, namespace: str, name: str, pod_name: str) -> None:
    """``Running``, only over ``Pending``: written at the version it was read at, since
    it takes no lock, so an end written meanwhile (a stop, a hop) is never undone."""
    obj = await hopping.current(rt, namespace, name)
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


def _job_ended(job: Obj) -> str | None:
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


async def on_job(rt: Runtime, job: Obj) -> None:
    """The batch Job ended: finish from its newest terminated pod, or say why not."""
    meta = job["metadata"]
    rt.jobs.seen(job)
    namespace = meta["namespace"]
    owner = (meta.get("labels") or {}).get(models.AGENTJOB_LABEL)
    ended = _job_ended(job)
    if not owner or ended is None or not policy_ownership.runs(job, owner):
        return  # Not (yet) the end of the Job the operator names for that AgentJob.
    if (namespace, meta["uid"]) in rt.finished:
        return

    async def exit() -> Exit:  # Listed only if the pod's own event did not record it.
        return await _exit_of(job, ended)

    await hopping.finish(rt, namespace, owner, meta["uid"], exit)


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
