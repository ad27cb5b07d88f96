"""Capturing: an attempt's output and how it ended, durable in Redis before anything acts.

An attempt's output is the final answer its runner handed over through the job API
(``store/answers.py``), when it did so for this attempt: the runner does it before its
container exits, so the answer is in Redis before the end that brings the hop here, and
no ``pods/log`` request is made.  Otherwise (a ``command`` agent, or a runner whose
hand-over failed) it is read through ``pods/log`` as soon as the agent container
terminates, before the pod can be garbage-collected.  Either way it is decoded with
replacement characters and bounded.  When it cannot be read (pod gone, log endpoint
failing) an "unavailable" record with the reason is stored instead, never an empty
string.  The same write records how the attempt ended (attempt, exit code, pod,
deadline): from then on the ending is decided, and a replay of this attempt after a
crash reads it back (:attr:`Captured.first` is False) instead of deciding again from
whatever is left of the pod.  :func:`verdict` then says, purely, whether the attempt
is retried or the job ends, and with which status.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from dataclasses import dataclass

from agentchain import models
from agentchain.core import statuswriting
from agentchain.core.hopstate import Exit, Hop, Output
from agentchain.core.rules import naming
from agentchain.core.rules.outcomes import job_ending, result_excerpt
from agentchain.flow.rules import retries, stoprules
from agentchain.hop import tracing
from agentchain.hop.rules.jobspec import CONTAINER_NAME
from agentchain.kube import workloads
from agentchain.models.agentjob import AgentJobStatus
from agentchain.models.aiagent import AiAgent
from agentchain.runtimes.rules import runtimecontainers
from agentchain.store.answers import AnswerStore
from agentchain.store.outputs import OUTPUT_MAX_BYTES, Capture, OutputRecord, unavailable
from agentchain.store.outputs import captured as outputs_captured
from agentchain.traces.rules import spans, steps
from agentchain.workspaces.rules import jobmounts, stepchanges


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

    status: AgentJobStatus


@dataclass(frozen=True)
class Retry:
    """Run the job again as ``attempt``; ``why`` the previous one ended; after ``delay``
    seconds (the AiAgent's retry backoff)."""

    attempt: int
    why: str
    delay: float = 0.0


async def capture(hop: Hop, exit: Exit) -> Captured:
    """The attempt's output and end, stored unless an earlier run stored them."""
    # Side by side: the stored ending and the answer are in Redis; the workspace report
    # is a log read of its own, wasted only on a replay.
    stored, answer, workspace = await asyncio.gather(
        hop.rt.outputs.get_capture(hop.namespace, hop.name, hop.uid),
        AnswerStore(hop.rt.redis).get(hop.namespace, hop.name, hop.uid, exit.attempt),
        _read_report(hop, exit),
    )
    if stored is not None and stored.attempt == exit.attempt:
        # Decided before a crash, perhaps acted on too: decide the same again.
        recorded = Exit(
            exit.attempt,
            stored.exit_code,
            stored.pod,
            stored.deadline,
            stop=stored.stop,
            prepare_exit=stored.prepare_exit,
            moments=exit.moments,  # What the pod says now, for the attempt's span.
        )
        return Captured(recorded, await _stored_output(hop), first=False)
    capture = Capture(
        attempt=exit.attempt,
        exit_code=exit.exit_code,
        pod=exit.pod,
        deadline=exit.deadline,
        prepare_exit=exit.prepare_exit,
    )
    # The answer the runner handed over is the output, and saves the log read; a job
    # that handed none over (a ``command`` agent) is read from its log as before.
    read = (answer.data, answer.full_size) if answer else await _read_output(hop, exit.pod)
    record, lost = _record(capture, read, exit.lost)
    record = dataclasses.replace(record, workspace=workspace)
    await hop.rt.outputs.write(hop.namespace, hop.name, hop.uid, record)
    if answer is not None:
        # The output record holds it now, for as long as outputs live.
        await AnswerStore(hop.rt.redis).discard(hop.namespace, hop.name, hop.uid)
    text = record.text if record.unavailable_reason is None else None
    return Captured(exit, Output(text, lost, workspace), first=True)


def verdict(hop: Hop, captured: Captured, agent: AiAgent | None) -> Retry | Ends:
    """Another attempt, or the job's end status (``agent`` None: it cannot be retried)."""
    exit, output = captured.exit, captured.output
    stopped = stoprules.ending_of(exit.stop)  # A stop decided it.
    ending = stopped or job_ending(
        exit.exit_code,
        output.text,
        completion_marker=agent.spec.completion_marker if agent else None,
        deadline_exceeded=exit.deadline,
        lost_reason=output.lost,
        prepare_failed=exit.prepare_exit is not None,
        runner=runtimecontainers.uses_runner(agent.spec) if agent else False,
    )
    delay = (
        retries.delay_before(ending, exit.exit_code, exit.attempt, agent.spec) if agent else None
    )
    if delay is not None:
        return Retry(exit.attempt + 1, retries.why(ending, exit.exit_code), delay)
    lost = None if stopped else output.lost
    status = AgentJobStatus(
        phase=ending.phase,
        reason=ending.reason,
        message=ending.message if not lost or exit.deadline else lost,
        exit_code=exit.exit_code,
        completion_time=statuswriting.now(),
    )
    if exit.stop is not None:
        who = AgentJobStatus.model_validate(stoprules.status_fields(exit.stop))
        status = statuswriting.merged(status, who)
    if exit.pod:
        status = statuswriting.merged(status, AgentJobStatus(pod_name=exit.pod))
    if hop.job.status.start_time is None and exit.moments.running:
        # Its pod ran and ended between two looks (a short container: a kubelet's relist
        # can report it Pending, then terminated), so no Running was written: its start
        # is the container's own, and the job still shows when it ran.
        started = dt.datetime.fromisoformat(exit.moments.running)
        status = statuswriting.merged(status, AgentJobStatus(start_time=started))
    if hop.job.status.chain_id is None:
        # Killed between creating the batch Job and the status write that names it.
        launched = AgentJobStatus(job_name=naming.batch_job_name(hop.name))
        chain = statuswriting.chain_fields(
            hop.obj, statuswriting.position(hop.obj, hop.rt.operator_keys)
        )
        status = statuswriting.merged(status, chain, launched)
    if output.text is not None:
        result, truncated, size = result_excerpt(output.text)
        excerpt = AgentJobStatus(result=result, result_truncated=truncated, result_size=size)
        status = statuswriting.merged(status, excerpt)
    return Ends(status)


async def trace(
    hop: Hop, exit: Exit, captured: Captured, verdict: Retry | Ends, capture_ns: tuple[int, int]
) -> None:
    """Record the ended attempt's span (its pod's life, ``exit.moments``) and its
    capture's (``capture_ns``: the operator's clock around :func:`capture`), before
    anything acts on ``verdict``: a replay records them again, once (``hop/tracing``)."""
    job = tracing.job_ref(hop)
    if job is None:
        return
    if isinstance(verdict, Retry):
        reason, failed = f"retried: {verdict.why}", True
    else:
        reason, failed = verdict.status.reason or "", verdict.status.phase == "Failed"
    done, output, meta = captured.exit, captured.output, hop.obj["metadata"]
    facts = steps.AttemptFacts(
        attempt=done.attempt,
        pod=done.pod,
        exit_code=done.exit_code,
        reason=reason,
        failed=failed,
        moments=exit.moments,
        deadline=done.deadline,
        lost=output.lost,
        not_before=spans.created_ns(
            meta.get("creationTimestamp"), meta.get("annotations", {}).get(models.CREATED_NS), 0
        ),
    )
    await hop.rt.traces.record(steps.attempt_span(job, facts, capture_ns[0]))
    usage = hop.job.status.usage
    attributes = {
        "agentchain.job.attempt": done.attempt,
        "agentchain.output.bytes": len(output.text.encode()) if output.text is not None else 0,
        "agentchain.output.lost": output.lost,
        "agentchain.capture.replayed": not captured.first,
        "agentchain.usage.tokens": usage.tokens if usage else None,
        "agentchain.usage.cost": usage.cost if usage else None,
        "agentchain.usage.turns": usage.turns if usage else None,
        "gen_ai.usage.input_tokens": usage.input_tokens if usage else None,
        "gen_ai.usage.output_tokens": usage.output_tokens if usage else None,
    }
    part = f"capture {done.attempt}"
    span = steps.step_span(job, part, *capture_ns, attributes, title="capture")
    await hop.rt.traces.record(span)


async def _read_output(hop: Hop, pod: str | None) -> tuple[bytes, int] | None:
    if pod is None:
        return None
    return await workloads.read_log_tail(hop.namespace, pod, CONTAINER_NAME, OUTPUT_MAX_BYTES)


async def _read_report(hop: Hop, exit: Exit) -> str | None:
    """What the job changed in its chain's workspace, from the report
    container that ran after the agent; None for a job without a workspace."""
    if hop.job.status.workspace is None:
        return None
    if exit.pod is None or exit.exit_code != 0:
        ended = "the agent did not end with exit code 0, so the report did not run"
        return stepchanges.changes_section(None, ended)
    read = await workloads.read_log_tail(
        hop.namespace, exit.pod, jobmounts.REPORT, stepchanges.REPORT_READ_BYTES
    )
    if read is None:
        return stepchanges.changes_section(None, "its log could not be read")
    report = stepchanges.parse_report(read[0].decode("utf-8", errors="replace"))
    return stepchanges.changes_section(report)


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
    record = await hop.rt.outputs.get(hop.namespace, hop.name, hop.uid)
    if record is None:  # Expired between two reads: a week after the capture.
        return Output(None, "The output expired before the job's end was recorded.")
    if record.unavailable_reason is not None:
        return Output(None, record.unavailable_reason, record.workspace)
    return Output(record.text, workspace=record.workspace)
