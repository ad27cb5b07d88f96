"""Finishing an AgentJob: capture the output, record how it ended, then progress.

Output is read through ``pods/log`` as soon as the agent container terminates,
before the pod can be garbage-collected; when the pod is already gone the job
says so (reason OutputLost or DeadlineExceeded) instead of holding an empty
string.  ``finish_*`` are safe to call any number of times: a terminal job is
only progressed, never recorded twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from agentchain import metrics, models
from agentchain.engine import (
    admitting,
    orphans,
    ownership,
    progressing,
    records,
    retrying,
    team,
)
from agentchain.engine.locking import lock_for
from agentchain.engine.runtime import Runtime
from agentchain.kube import events, resources, workloads
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import Reason
from agentchain.policy import naming, retries, stops
from agentchain.policy import ownership as policy_ownership
from agentchain.policy.jobspec import CONTAINER_NAME
from agentchain.policy.outcomes import (
    Ending,
    is_terminal,
    job_ending,
    result_excerpt,
)
from agentchain.store.outputs import (
    OUTPUT_MAX_BYTES,
    Capture,
    OutputRecord,
    unavailable,
)
from agentchain.store.outputs import captured as outputs_captured

log = logging.getLogger(__name__)
Obj = dict[str, Any]


def terminated_state(pod: Obj) -> Obj | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == CONTAINER_NAME:
            state = cs.get("state") or {}
            terminated = state.get("terminated")
            return dict(terminated) if terminated else None
    return None


def _exit_code(terminated: Obj) -> int | None:
    code = terminated.get("exitCode")
    return int(code) if code is not None else None


async def on_pod(rt: Runtime, pod: Obj) -> None:
    """A watched pod changed: mark Running, or finish when the agent container ended."""
    meta = pod["metadata"]
    namespace = meta["namespace"]
    labels = meta.get("labels") or {}
    rt.pods.seen(namespace, labels)
    owner = labels.get(models.AGENTJOB_LABEL)
    if not owner:
        return
    terminated = terminated_state(pod)
    running = terminated is None and (pod.get("status") or {}).get("phase") == "Running"
    if not (running or terminated) or meta.get("deletionTimestamp"):
        # A pod the Job controller killed (deadline): the Job watcher records why.
        return
    # Only the operator's own pods speak for a job, whatever labels a pod carries.
    job = await ownership.controlling_job(rt.jobs, pod, owner)
    if job is None:
        return
    if terminated is None:
        await _mark_running(rt, namespace, owner, meta["name"])
        return
    await finish(
        rt,
        namespace,
        owner,
        pod_name=meta["name"],
        exit_code=_exit_code(terminated),
        attempt=attempt_of(job),
        prefetch=True,
    )


attempt_of = policy_ownership.attempt_of


async def _agentjob(rt: Runtime, namespace: str, name: str) -> Obj | None:
    """The AgentJob as of now: from the watch when that is as of our last write to it
    (one read less beside the hop's log read), else read."""
    cached = rt.unsettled.current(namespace, name)
    if cached is not None:
        return cached
    return await resources.get(namespace, resources.AGENTJOBS, name)


async def _mark_running(rt: Runtime, namespace: str, name: str, pod_name: str) -> None:
    obj = await _agentjob(rt, namespace, name)
    if obj is None or (obj.get("status") or {}).get("phase") not in (None, "Pending"):
        return
    status = {"phase": "Running", "reason": Reason.RUNNING, "podName": pod_name}
    status["message"] = f"Pod {pod_name} is running."
    status["startTime"] = records.now().isoformat()
    await records.patch(obj, status)
    await team.job(rt, obj)


def _job_ended(job: Obj) -> str | None:
    """'Complete' or the failure reason once the batch Job has a final condition."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") != "True":
            continue
        if cond.get("type") == "Complete":
            return "Complete"
        if cond.get("type") == "Failed":
            return str(cond.get("reason") or "Failed")
    return None


async def on_job(rt: Runtime, job: Obj) -> None:
    """The batch Job ended: finish from its newest terminated pod, or say why not."""
    meta = job["metadata"]
    rt.jobs.seen(job)
    owner = (meta.get("labels") or {}).get(models.AGENTJOB_LABEL)
    if owner and orphans.is_orphan(job):
        await orphans.settle(rt, job)  # Adopted, or deleted when its AgentJob will not run it.
    ended = _job_ended(job)
    if not owner or ended is None or not policy_ownership.runs(job, owner):
        return  # Not (yet) the end of the Job the operator names for that AgentJob.
    namespace = meta["namespace"]
    attempt = attempt_of(job)
    selector = f"job-name={meta['name']}"
    pods = [p for p in await workloads.list_pods(namespace, selector) if terminated_state(p)]
    pods.sort(key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""))
    if pods and ended != "DeadlineExceeded":
        last = pods[-1]
        code = _exit_code(terminated_state(last) or {})
        pod = last["metadata"]["name"]
        await finish(rt, namespace, owner, pod_name=pod, exit_code=code, attempt=attempt)
        return
    deadline = ended == "DeadlineExceeded"
    lost = f"The batch Job ended ({ended}) and no pod was left to read output from."
    await finish(
        rt,
        namespace,
        owner,
        pod_name=None,
        exit_code=None,
        deadline=deadline,
        lost=lost,
        attempt=attempt,
    )


async def finish(
    rt: Runtime,
    namespace: str,
    name: str,
    *,
    pod_name: str | None,
    exit_code: int | None,
    deadline: bool = False,
    lost: str | None = None,
    attempt: int = 1,
    prefetch: bool = False,
) -> None:
    """Record how ``attempt`` of the job ended: retry it, or end the job and progress
    its chain.  ``prefetch`` (the pod watcher, first to see a container end) reads the
    log alongside the job: one round trip less per hop, wasted only when the job
    turns out already ended."""
    ended_at = time.monotonic()
    async with lock_for(namespace, name):
        # The log read is the one on the hop's critical path: sent first.
        captured, obj, stored = await asyncio.gather(
            _read_output(namespace, pod_name if prefetch else None),
            _agentjob(rt, namespace, name),
            rt.outputs.get_capture(namespace, name),
        )
        if obj is None:
            return
        status = records.parse(obj).status
        if is_terminal(status):
            await progressing.progress_locked(rt, obj)
            return
        if attempt < (status.attempt or 1):
            return  # An earlier attempt's late event: that attempt was already retried.
        first_pass = stored is None or stored.attempt != attempt
        durable: asyncio.Future[None] | None = None
        if stored is not None and not first_pass:
            # Decided before a crash, perhaps acted on too: decide the same again,
            # whatever is left of the pod now.
            text, lost = await _stored_output(rt, namespace, name)
            exit_code, deadline, pod_name = stored.exit_code, stored.deadline, stored.pod
        else:
            if not prefetch:
                captured = await _read_output(namespace, pod_name)
            capture = Capture(attempt=attempt, exit_code=exit_code, pod=pod_name, deadline=deadline)
            record, lost = _record(capture, captured, lost)
            text = record.text if record.unavailable_reason is None else None
            # Written while the chain's next step is decided and prepared; nothing
            # acts on the decision before it is durable (``_end_and_progress``).
            durable = asyncio.ensure_future(rt.outputs.write(namespace, name, record))
            await asyncio.sleep(0)  # Sent now, not after the decision's CPU work below.
        try:
            found = await rt.agents.by_trigger(namespace, obj["spec"]["agentRole"])
            agent = found if isinstance(found, AiAgent) else None  # Ambiguous: no retry.
            marker = agent.spec.completion_marker if agent else None
            stop = stored.stop if stored is not None and stored.attempt == attempt else None
            ending = stops.ending_of(stop) or job_ending(
                exit_code,
                text,
                completion_marker=marker,
                deadline_exceeded=deadline,
                lost_reason=lost,
            )
            delay = retries.delay_before(ending, exit_code, attempt, agent.spec) if agent else None
            if agent is not None and delay is not None:  # Backoff and reasons: issue 16.
                if durable is not None:
                    await durable
                why = retries.why(ending, exit_code)
                await retrying.retry(rt, obj, agent, attempt + 1, why, delay)
                return
            end = _end_status(
                obj, ending, exit_code, text, deadline=deadline, lost=lost, pod=pod_name
            )
            await _end_and_progress(rt, obj, end, ended_at, (text, lost), first_pass, durable)
        finally:
            if durable is not None:
                await asyncio.wait([durable])  # Never left running past the lock.
                if not durable.cancelled():
                    durable.exception()  # Raised above, where it was awaited, if at all.
    await wake_dependents(rt, namespace, name)


async def _end_and_progress(
    rt: Runtime,
    obj: Obj,
    end: Obj,
    ended_at: float,
    output: progressing.Output,
    first_pass: bool,
    durable: asyncio.Future[None] | None,
) -> None:
    """Move the chain on from the job, writing the job's end after the child's creates.

    The ending is durable in Redis once ``durable`` is done, so the child can be
    created and started from the status about to be written: the parent's patch
    leaves the hop's critical path and carries ``status.next`` with it.  Nothing is
    written or created before ``durable``: a replay must decide the same.  When
    progressing fails first, the end is written anyway, so the job shows that it ended.
    """
    projected = {**obj, "status": {**(obj.get("status") or {}), **end}}

    async def close(fields: Obj) -> None:
        if durable is not None:
            await durable
        await _close(rt, obj, {**end, **fields})

    closed = progressing.Closed(close)
    try:
        await progressing.progress_locked(
            rt,
            projected,
            ended_at=ended_at,
            closed=closed,
            output=output,
            first_pass=first_pass,
            durable=durable,
        )
    finally:
        await closed()


async def wake_dependents(rt: Runtime, namespace: str, name: str) -> None:
    """Start Waiting jobs that depend on ``name`` now, not at the next resync.

    They come from the watch-fed index, not a list of every AgentJob per finished job;
    one whose Waiting status the watch has not delivered yet is the resync's.
    """
    from agentchain.engine import starting

    for item in rt.unsettled.waiting_on(namespace, name):
        await starting.start(rt, item)


async def _read_output(namespace: str, pod: str | None) -> tuple[bytes, int] | None:
    if pod is None:
        return None
    return await workloads.read_log_tail(namespace, pod, CONTAINER_NAME, OUTPUT_MAX_BYTES)


def _record(
    capture: Capture, captured: tuple[bytes, int] | None, lost: str | None
) -> tuple[OutputRecord, str | None]:
    """What to store of the capture, and why the output is lost if it is."""
    pod = capture.pod
    if pod is not None and captured is None:
        lost = f"Pod {pod} was gone before its output could be read."
    if pod is None or captured is None:
        # Retrievable as a reason, never as an empty string (SPEC §2).
        reason = lost or "The output could not be captured."
        return unavailable(reason, capture=capture), reason
    data, full_size = captured
    return outputs_captured(data, full_size=full_size, capture=capture), None


async def _stored_output(rt: Runtime, namespace: str, name: str) -> tuple[str | None, str | None]:
    record = await rt.outputs.get(namespace, name)
    if record is None:  # Expired between two reads: a week after the capture.
        return None, "The output expired before the job's end was recorded."
    if record.unavailable_reason is not None:
        return None, record.unavailable_reason
    return record.text, None


def _end_status(
    obj: Obj,
    ending: Ending,
    exit_code: int | None,
    text: str | None,
    *,
    deadline: bool,
    lost: str | None,
    pod: str | None,
) -> Obj:
    status: Obj = {
        "phase": ending.phase,
        "reason": ending.reason,
        "message": ending.message if not lost or deadline else lost,
        "exitCode": exit_code,
        "completionTime": records.now().isoformat(),
    }
    if pod:
        status["podName"] = pod
    if records.parse(obj).status.chain_id is None:
        # Killed between creating the batch Job and the status write that names it.
        status.update(records.chain_fields(obj, records.position(obj)))
        status["jobName"] = naming.batch_job_name(obj["metadata"]["name"])
    if text is not None:
        result, truncated, size = result_excerpt(text)
        status.update({"result": result, "resultTruncated": truncated, "resultSize": size})
    return status


async def record_failure(rt: Runtime, obj: Obj, reason: str, message: str) -> None:
    """Fail a job that never ran (no agent, bad template): visible, then progressed."""
    status = {"phase": "Failed", "reason": reason, "message": message}
    status["completionTime"] = records.now().isoformat()
    await _close(rt, obj, status)
    await progressing.progress_locked(rt, obj)


async def _close(rt: Runtime, obj: Obj, status: Obj) -> None:
    namespace, name = records.name_of(obj)
    await records.patch(obj, status)
    # A job token dies with its job.
    await rt.tokens.revoke(namespace, name, obj["metadata"].get("uid", ""))
    await team.job(rt, obj)
    phase = str(status["phase"])
    metrics.JOBS.labels(namespace, obj["spec"]["agentRole"], phase).inc()
    await admitting.job_ended(rt, obj)  # Its slot under the namespace's limit (issue 16).
    if phase == "Failed":
        await events.emit(
            obj, "Warning", str(status["reason"]), str(status["message"]), key="ended"
        )
