"""Stopping an AgentJob or a chain: terminate the pod, end the job Cancelled, once.

A stop arrives as annotations on the AgentJob (``policy/stops.py``; the job API and
``kubectl annotate`` write the same ones), so it is in etcd before anything acts on
it, and the AgentJob watch (``handlers/agentjobs.py``) or the resync applies it:

1. Under the job's lock (the one ``finishing.finish`` holds), the output the agent
   printed so far is read, then the stop is *claimed* as the attempt's ending in
   Redis (``store/stops.py``).  The claim and the capture of a natural end write the
   same record, first writer wins: when the container's end was recorded first, that
   end is the outcome and the stop does nothing more (``finish`` records it).
2. The batch Job of the attempt is deleted; the garbage collector deletes its pod,
   which gets its ``terminationGracePeriodSeconds`` (30 s unless the pod says
   otherwise) between SIGTERM and SIGKILL to wrap up.  Its token is revoked at once.
3. The job ends ``Cancelled`` (reason ``Stopped``, or ``Superseded`` with the newer
   job that replaced it), with who stopped it and why; its chain decision is
   ``Stop``, so no child is spawned, and the chain is marked complete once.

A crash anywhere in between is replayed from the annotations, or from the claim by
``finish`` (which reads a stop's ending back like any recorded ending).

A chain stop is recorded in Redis before its live jobs are annotated: a child that a
job spawned just before it ended (so after the listing) is cancelled when it would
start (``held``), instead of running.
"""

from __future__ import annotations

import logging

from agentchain import metrics
from agentchain.engine import finishing, progressing, records
from agentchain.engine.locking import lock_for
from agentchain.engine.runtime import Runtime
from agentchain.kube import errors, events, resources, workloads
from agentchain.policy import naming, stops
from agentchain.policy.jobspec import CONTAINER_NAME
from agentchain.policy.outcomes import Ending, is_terminal, result_excerpt
from agentchain.store.outputs import OUTPUT_MAX_BYTES, Capture, OutputRecord, captured, unavailable
from agentchain.store.stops import StopStore

log = logging.getLogger(__name__)
Obj = records.Obj
ENDING = "ending"
"""What a stop answers when the job's natural end was recorded first."""


def wants_stop(obj: Obj) -> bool:
    """Whether the watched job asks to be stopped and has not ended yet."""
    status = obj.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed", "Skipped", "Cancelled"):
        return False
    return stops.requested((obj.get("metadata") or {}).get("annotations")) is not None


async def stop(rt: Runtime, obj: Obj) -> str:
    """Apply the stop ``obj``'s annotations ask for; answers the job's phase after it,
    or ``ENDING`` when its natural end won the race."""
    namespace, name = records.name_of(obj)
    async with lock_for(namespace, name):
        fresh = await resources.get(namespace, resources.AGENTJOBS, name)
        if fresh is None:
            return "Gone"
        request = stops.requested(fresh["metadata"].get("annotations"))
        if request is None:
            return str(records.parse(fresh).status.phase or "Pending")
        return await cancel_locked(rt, fresh, request)


async def cancel_locked(rt: Runtime, obj: Obj, request: stops.StopRequest) -> str:
    """End ``obj`` Cancelled for ``request`` unless it ended first; the caller holds its lock."""
    job = records.parse(obj)
    if is_terminal(job.status):
        return str(job.status.phase)
    namespace, name = records.name_of(obj)
    attempt = job.status.attempt or 1
    record = await _stopped_record(namespace, job.status.pod_name, attempt, request)
    won = await StopStore(rt.redis).claim(namespace, name, record)
    if won is not None and won.stop is None:
        log.info("stop of %s/%s: its end was recorded first", namespace, name)
        return ENDING
    if won is not None:  # Claimed before a crash: that stop is the one recorded.
        request = stops.StopRequest.from_record(won.stop) or request
        stored = await rt.outputs.get(namespace, name)
        record = stored if stored is not None else record
    # The attempt's Job by its deterministic name: also one launched just before a crash
    # whose status never named it.  Its pod goes with it, gracefully.
    await workloads.delete_job(namespace, naming.attempt_job_name(name, attempt))
    ending = stops.ending(request)
    await finishing._close(rt, obj, _status(obj, ending, request, record))
    await events.emit(obj, "Normal", ending.reason, ending.message, key="stopped")
    metrics.STOPS.labels(namespace, ending.reason).inc()
    await progressing.progress_locked(rt, obj)
    log.info("stopped %s/%s: %s", namespace, name, ending.message)
    return "Cancelled"


async def _stopped_record(
    namespace: str, pod: str | None, attempt: int, request: stops.StopRequest
) -> OutputRecord:
    """The ending record of a stop: with what the agent printed until now, when readable."""
    capture = Capture(attempt, None, pod, False, stop=request.to_record())
    read = None
    if pod is not None:
        try:
            read = await workloads.read_log_tail(namespace, pod, CONTAINER_NAME, OUTPUT_MAX_BYTES)
        except errors.KubeError as exc:  # The stop matters more than the output.
            log.warning("output of stopped pod %s/%s not read: %s", namespace, pod, exc)
    if read is None:
        return unavailable("The job was stopped before any output was read.", capture=capture)
    data, size = read
    return captured(data, full_size=size, capture=capture)


def _status(obj: Obj, ending: Ending, request: stops.StopRequest, record: OutputRecord) -> Obj:
    status: Obj = {
        "phase": ending.phase,
        "reason": ending.reason,
        "message": ending.message,
        "completionTime": records.now().isoformat(),
        "stoppedBy": request.by,
    }
    if request.successor:
        status["supersededBy"] = request.successor
    if records.parse(obj).status.chain_id is None:  # Stopped before its first status write.
        status.update(records.chain_fields(obj, records.position(obj)))
    if record.available:
        result, truncated, size = result_excerpt(record.text)
        status.update({"result": result, "resultTruncated": truncated, "resultSize": size})
    return status


async def held(rt: Runtime, obj: Obj, init: Obj) -> bool:
    """Cancel, instead of starting, a job that is asked to stop or whose chain was
    stopped; the caller holds its lock and has not written ``init`` yet."""
    request = stops.requested(obj["metadata"].get("annotations"))
    if request is None:
        chain_id = init.get("chainId") or records.parse(obj).status.chain_id
        store = StopStore(rt.redis)
        found = await store.chain_stopped(obj["metadata"]["namespace"], chain_id or "")
        if found is None:
            return False
        request = stops.StopRequest.from_record(found) or stops.StopRequest(by="unknown")
    if init:
        await records.patch(obj, dict(init))
        init.clear()
    await cancel_locked(rt, obj, request)
    return True


async def request_stop(namespace: str, name: str, request: stops.StopRequest) -> Obj | None:
    """Ask a job to stop (the API's side): its annotations; None when it is gone."""
    return await resources.patch_metadata(
        namespace,
        resources.AGENTJOBS,
        name,
        labels={},
        annotations=stops.annotations_for(request),
    )


async def request_chain_stop(
    rt: Runtime, namespace: str, chain_id: str, jobs: list[Obj], request: stops.StopRequest
) -> list[str]:
    """Stop a chain: recorded first (so later children are cancelled), then each live
    job asked to stop; answers the names asked."""
    store = StopStore(rt.redis)
    await store.stop_chain(namespace, chain_id, request.by, request.reason, request.successor)
    asked = []
    for obj in jobs:
        if not is_terminal(records.parse(obj).status):
            await request_stop(namespace, obj["metadata"]["name"], request)
            asked.append(str(obj["metadata"]["name"]))
    return asked
