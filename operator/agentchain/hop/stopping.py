"""Stopping an AgentJob or a chain: terminate the pod, end the job Cancelled, once.

A stop arrives as annotations on the AgentJob (``flow/rules/stoprules.py``; the job API and
``kubectl annotate`` write the same ones), so it is in etcd before anything acts on
it, and ``hop.reconciling`` applies it, whatever event brought it there:

1. Under the job's lock, the output the agent printed so far is read, then the stop
   is *claimed* as the attempt's ending in Redis (``flow/stoprecords.py``).  The claim
   and the capture of a natural end write the same record, first writer wins: when
   the container's end was recorded first, that end is the outcome and the stop does
   nothing more (the hop records it).
2. The batch Job of the attempt is deleted, once (a look after it finds the deletion
   recorded beside the claim); the garbage collector deletes its pod, which gets its
   ``terminationGracePeriodSeconds`` (30 s unless the pod says otherwise) between
   SIGTERM and SIGKILL to wrap up.  Its token is revoked at once.
3. The lock is released, and the reconcile that called the stop takes it again and
   does the job's next step: the recorded ending is there, so the hop ends the attempt
   from it (``hopping.finish``): the job ends ``Cancelled`` (reason ``Stopped``, or
   ``Superseded`` with the newer job that replaced it), with who stopped it and why;
   its chain decision is ``Stop``, so no child is spawned, and the chain is marked
   complete once.

A crash anywhere in between is replayed from the annotations, or from the claim by
any later look at the job (the capture reads a stop's ending back like any recorded
ending).  A job not launched yet is cancelled where it would launch (``gating.held``),
which also deletes the batch Job of a launch killed before its status write named
it (``launching._never_runs``).
"""

from __future__ import annotations

import logging

from agentchain.core import statuswriting
from agentchain.core.rules import naming
from agentchain.core.rules.outcomes import is_terminal
from agentchain.core.runtime import Runtime
from agentchain.flow.rules import stoprules
from agentchain.flow.stoprecords import StopStore
from agentchain.hop.rules.jobspec import CONTAINER_NAME
from agentchain.kube import apierrors, resources, workloads
from agentchain.store.outputs import OUTPUT_MAX_BYTES, Capture, OutputRecord, captured, unavailable

log = logging.getLogger(__name__)
Obj = statuswriting.Obj
ENDING = "ending"
"""What a stop answers when the job's natural end was recorded first."""


def wants_stop(obj: Obj) -> bool:
    """Whether the watched job asks to be stopped and has not ended yet."""
    status = obj.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed", "Skipped", "Cancelled"):
        return False
    return stoprules.requested((obj.get("metadata") or {}).get("annotations")) is not None


async def stop(rt: Runtime, obj: Obj) -> str:
    """Claim the ending of the attempt for the stop ``obj``'s annotations ask for and
    delete its batch Job; answers the job's phase as read, or ``ENDING`` when its
    natural end won the race.  Ending the job is the caller's next step."""
    namespace, name = statuswriting.name_of(obj)
    async with rt.locks.holding(namespace, name):
        fresh = await resources.get(namespace, resources.AGENTJOBS, name)
        if fresh is None:
            return "Gone"
        job = statuswriting.parse(fresh)
        request = stoprules.requested(fresh["metadata"].get("annotations"))
        if request is None or is_terminal(job.status):
            return str(job.status.phase or "Pending")
        if job.status.job_name is None:
            return str(job.status.phase or "Pending")  # Cancelled where it would launch.
        attempt, uid = job.status.attempt or 1, str(fresh["metadata"]["uid"])
        stops = StopStore(rt.redis)
        recorded = await rt.outputs.get_capture(namespace, name, uid)
        if recorded is None or recorded.attempt < attempt:  # Nothing recorded: claim it.
            recorded = await _claim(
                rt, (namespace, name, uid), job.status.pod_name, attempt, request
            )
        if recorded is not None and recorded.stop is None:
            log.info("stop of %s/%s: its end was recorded first", namespace, name)
            return ENDING
        if not await stops.job_deleted(namespace, name, uid, attempt):
            # The attempt's Job by its deterministic name; its pod goes gracefully.
            await workloads.delete_job(namespace, naming.attempt_job_name(name, attempt))
            await stops.deleted_job(namespace, name, uid, attempt)
    log.info("stopped %s/%s (by %s)", namespace, name, request.by)
    return "Cancelled"


async def _claim(
    rt: Runtime,
    job: tuple[str, str, str],
    pod: str | None,
    attempt: int,
    request: stoprules.StopRequest,
) -> Capture | None:
    """Claim the ending of the attempt of ``job`` (namespace, name, uid) for the stop
    (None: won), with the output until now."""
    namespace, name, uid = job
    record = await _stopped_record(namespace, pod, attempt, request)
    return await StopStore(rt.redis).claim(namespace, name, uid, record)


async def _stopped_record(
    namespace: str, pod: str | None, attempt: int, request: stoprules.StopRequest
) -> OutputRecord:
    """The ending record of a stop: with what the agent printed until now, when readable."""
    capture = Capture(attempt, None, pod, False, stop=request.to_record())
    read = None
    if pod is not None:
        try:
            read = await workloads.read_log_tail(namespace, pod, CONTAINER_NAME, OUTPUT_MAX_BYTES)
        except apierrors.KubeError as exc:  # The stop matters more than the output.
            log.warning("output of stopped pod %s/%s not read: %s", namespace, pod, exc)
    if read is None:
        return unavailable("The job was stopped before any output was read.", capture=capture)
    data, size = read
    return captured(data, full_size=size, capture=capture)
