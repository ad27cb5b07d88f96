"""Capturing: an attempt's output and how it ended, durable in Redis before anything acts.

Output is read through ``pods/log`` as soon as the agent container terminates,
before the pod can be garbage-collected, decoded with replacement characters and
bounded.  When it cannot be read (pod gone, log endpoint failing) an "unavailable"
record with the reason is stored instead, never an empty string.  The same write
records how the attempt ended (attempt, exit code, pod, deadline): from then on the
ending is decided, and a replay of this attempt after a crash reads it back
(:attr:`Captured.first` is False) instead of deciding again from whatever is left
of the pod.  :func:`verdict` then says, purely, whether the attempt is retried or
the job ends, and with which status.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentchain.engine import records
from agentchain.engine.hops import Exit, Hop, Obj, Output
from agentchain.kube import workloads
from agentchain.models.aiagent import AiAgent
from agentchain.policy import naming
from agentchain.policy.jobspec import CONTAINER_NAME
from agentchain.policy.outcomes import job_ending, result_excerpt, should_retry
from agentchain.store.outputs import OUTPUT_MAX_BYTES, Capture, OutputRecord, unavailable
from agentchain.store.outputs import captured as outputs_captured


@dataclass(frozen=True)
class Captured:
    """An attempt's end as recorded: ``exit`` is the stored one on a replay."""

    exit: Exit
    output: Output
    first: bool
    """Recorded just now: no child of this ending can exist yet."""


@dataclass(frozen=True)
class Ends:
    """The job ends, with ``status``."""

    status: Obj


@dataclass(frozen=True)
class Retry:
    """Run the job again as ``attempt``; ``why`` the previous one ended."""

    attempt: int
    why: str


async def capture(hop: Hop, exit: Exit) -> Captured:
    """The attempt's output and end, stored unless an earlier run stored them."""
    stored = await hop.rt.outputs.get_capture(hop.namespace, hop.name)
    if stored is not None and stored.attempt == exit.attempt:
        # Decided before a crash, perhaps acted on too: decide the same again.
        recorded = Exit(exit.attempt, stored.exit_code, stored.pod, stored.deadline)
        return Captured(recorded, await _stored_output(hop), first=False)
    read = await _read_output(hop.namespace, exit.pod)
    capture = Capture(
        attempt=exit.attempt, exit_code=exit.exit_code, pod=exit.pod, deadline=exit.deadline
    )
    record, lost = _record(capture, read, exit.lost)
    await hop.rt.outputs.write(hop.namespace, hop.name, record)
    text = record.text if record.unavailable_reason is None else None
    return Captured(exit, Output(text, lost), first=True)


def verdict(hop: Hop, captured: Captured, agent: AiAgent | None) -> Retry | Ends:
    """Another attempt, or the job's end status (``agent`` None: it cannot be retried)."""
    exit, output = captured.exit, captured.output
    ending = job_ending(
        exit.exit_code,
        output.text,
        completion_marker=agent.spec.completion_marker if agent else None,
        deadline_exceeded=exit.deadline,
        lost_reason=output.lost,
    )
    if agent is not None and should_retry(ending, exit.attempt, agent.spec.backoff_limit):
        return Retry(exit.attempt + 1, f"exited with code {exit.exit_code}")
    lost = output.lost
    status: Obj = {
        "phase": ending.phase,
        "reason": ending.reason,
        "message": ending.message if not lost or exit.deadline else lost,
        "exitCode": exit.exit_code,
        "completionTime": records.now().isoformat(),
    }
    if exit.pod:
        status["podName"] = exit.pod
    if hop.job.status.chain_id is None:
        # Killed between creating the batch Job and the status write that names it.
        status.update(records.chain_fields(hop.obj, records.position(hop.obj)))
        status["jobName"] = naming.batch_job_name(hop.name)
    if output.text is not None:
        result, truncated, size = result_excerpt(output.text)
        status.update({"result": result, "resultTruncated": truncated, "resultSize": size})
    return Ends(status)


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


async def _stored_output(hop: Hop) -> Output:
    record = await hop.rt.outputs.get(hop.namespace, hop.name)
    if record is None:  # Expired between two reads: a week after the capture.
        return Output(None, "The output expired before the job's end was recorded.")
    if record.unavailable_reason is not None:
        return Output(None, record.unavailable_reason)
    return Output(record.text)
