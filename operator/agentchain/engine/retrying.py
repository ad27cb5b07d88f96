"""Retry backoff: attempt N+1 starts when its wait is over, also after a restart.

``finishing.finish`` decides a retry (``policy/retries.delay_before``) under the job's
lock.  With no wait the next attempt is launched at once, as before.  With a wait, the
job's status records the attempt to come and when (``attempt``, ``retryAt``, phase
``Pending``, reason ``Retrying``) -- durable before anything waits -- and a timer in
this process launches it when due.  After a restart the resync finds ``retryAt`` and
launches it (or sets the timer again): the wait is never lost, and never doubled,
because the launch re-reads the job under its lock and the attempt's batch Job has a
deterministic name.  Events of the failed attempt are ignored meanwhile, as for any
earlier attempt (its number is below ``status.attempt``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

from agentchain.engine import records
from agentchain.engine.locking import lock_for
from agentchain.engine.runtime import Runtime
from agentchain.kube import events, resources
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import Reason
from agentchain.policy import naming
from agentchain.policy.outcomes import is_terminal

log = logging.getLogger(__name__)
Obj = records.Obj
_TIMERS: dict[tuple[str, str, int], asyncio.TimerHandle] = {}
_TASKS: set[asyncio.Task[None]] = set()


async def retry(
    rt: Runtime, obj: Obj, agent: AiAgent, attempt: int, why: str, delay: float
) -> None:
    """Run ``attempt`` after ``delay`` seconds; the caller holds the job's lock."""
    from agentchain.engine import starting

    if delay <= 0:
        await starting.retry(rt, obj, agent, attempt, why)
        return
    due = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay)
    total = agent.spec.backoff_limit + 1
    message = (
        f"Attempt {attempt} of {total} starts in {delay:g}s (at {due.isoformat()}) after "
        f"attempt {attempt - 1} {why}"
    )
    status = {"phase": "Pending", "reason": Reason.RETRYING, "message": message}
    await records.patch(obj, {**status, "attempt": attempt, "retryAt": due.isoformat()})
    await events.emit(obj, "Warning", Reason.RETRYING, message, key=f"retry:{attempt}")
    _schedule(rt, *records.name_of(obj), attempt, delay)


def _schedule(rt: Runtime, namespace: str, name: str, attempt: int, delay: float) -> None:
    key = (namespace, name, attempt)
    if key in _TIMERS:
        return

    def fire() -> None:
        _TIMERS.pop(key, None)
        task = asyncio.ensure_future(_launch(rt, namespace, name, attempt))
        _TASKS.add(task)
        task.add_done_callback(_TASKS.discard)

    _TIMERS[key] = asyncio.get_running_loop().call_later(max(delay, 0.0), fire)


def _waiting(obj: Obj, attempt: int | None = None) -> bool:
    """Whether the job waits for a backed-off attempt (``attempt`` when given)."""
    job = records.parse(obj)
    status = job.status
    if is_terminal(status) or status.retry_at is None or status.attempt is None:
        return False
    if attempt is not None and status.attempt != attempt:
        return False
    return status.job_name != naming.attempt_job_name(obj["metadata"]["name"], status.attempt)


async def _launch(rt: Runtime, namespace: str, name: str, attempt: int) -> None:
    from agentchain.engine import finishing, starting

    try:
        async with lock_for(namespace, name):
            obj = await resources.get(namespace, resources.AGENTJOBS, name)
            if obj is None or not _waiting(obj, attempt):
                return  # Stopped, deleted or launched meanwhile.
            agent = await rt.agents.by_trigger(namespace, obj["spec"]["agentRole"])
            if not isinstance(agent, AiAgent):
                message = "The job's agent is gone or ambiguous; its retry cannot start."
                await finishing.record_failure(rt, obj, Reason.AGENT_NOT_FOUND, message)
                return
            await starting.retry(rt, obj, agent, attempt, "failed (its backoff is over)")
            await records.patch(obj, {"retryAt": None})
    except Exception:  # The resync launches it at its next look.
        log.exception("launching attempt %d of %s/%s failed", attempt, namespace, name)


async def resume(rt: Runtime, obj: Obj) -> bool:
    """The resync's look at a job: True when it waits for a backed-off attempt (whose
    launch is then due now or scheduled)."""
    if not _waiting(obj):
        return False
    status = records.parse(obj).status
    assert status.retry_at is not None and status.attempt is not None
    remaining = (status.retry_at - dt.datetime.now(dt.UTC)).total_seconds()
    namespace, name = records.name_of(obj)
    if remaining <= 0:
        await _launch(rt, namespace, name, status.attempt)
    else:
        _schedule(rt, namespace, name, status.attempt, remaining)
    return True
