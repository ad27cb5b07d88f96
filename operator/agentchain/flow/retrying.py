"""Retry backoff: attempt N+1 starts when its wait is over, also after a restart.

``capturing.verdict`` decides a retry and its wait (``flow/rules/retries.delay_before``).
With no wait ``hop.hopping`` launches the next attempt at once, as before.  With a
wait, :func:`hold` records the attempt to come and when it is due in the job's status
(``attempt``, ``retryAt``, phase ``Pending``, reason ``Retrying``) -- durable before
anything waits -- and sets a timer in this process that calls back into the hop
sequence (``hopping.relaunch``) when it is due.  After a restart the resync finds
``retryAt`` (:func:`resume`) and relaunches it, or sets the timer again: the wait is
never lost, and never doubled, because the relaunch re-reads the job under its lock
and the attempt's batch Job has a deterministic name.  Events of the failed attempt
are ignored meanwhile, as for any earlier attempt (its number is below
``status.attempt``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable

from agentchain.core import statuswriting
from agentchain.core.hopstate import Hop, Obj, typed
from agentchain.core.rules import naming
from agentchain.core.rules.outcomes import is_terminal
from agentchain.core.runtime import Runtime
from agentchain.kube import events
from agentchain.models.conditions import Reason

log = logging.getLogger(__name__)
Relaunch = Callable[[Runtime, str, str], Awaitable[None]]
"""Launch the job's due attempt (``hopping.relaunch``)."""


async def hold(hop: Hop, attempt: int, message: str, delay: float, relaunch: Relaunch) -> None:
    """Record that ``attempt`` starts in ``delay`` seconds, and start it then."""
    due = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay)
    text = f"{message}; it starts in {delay:g}s (at {due.isoformat()})"
    status = {"phase": "Pending", "reason": Reason.RETRYING, "message": text, "podName": None}
    await hop.patch(typed({**status, "attempt": attempt, "retryAt": due.isoformat()}))
    await events.emit(hop.obj, "Warning", Reason.RETRYING, text, key=f"retry:{attempt}")
    _schedule(hop.rt, hop.namespace, hop.name, attempt, delay, relaunch)


def _schedule(
    rt: Runtime, namespace: str, name: str, attempt: int, delay: float, relaunch: Relaunch
) -> None:
    key = (namespace, name, attempt)
    if key in rt.retry_timers:
        return

    async def launch() -> None:
        try:
            await relaunch(rt, namespace, name)
        except Exception:  # The resync relaunches it at its next look.
            log.exception("launching attempt %d of %s/%s failed", attempt, namespace, name)

    def fire() -> None:
        rt.retry_timers.pop(key, None)
        task = asyncio.ensure_future(launch())
        rt.background.add(task)
        task.add_done_callback(rt.background.discard)

    rt.retry_timers[key] = asyncio.get_running_loop().call_later(max(delay, 0.0), fire)


def due_attempt(obj: Obj) -> int | None:
    """The attempt the job waits to launch after a backoff, or None."""
    status = statuswriting.parse(obj).status
    if is_terminal(status) or status.retry_at is None or status.attempt is None:
        return None
    if status.job_name == naming.attempt_job_name(obj["metadata"]["name"], status.attempt):
        return None  # Launched already.
    return status.attempt


async def resume(rt: Runtime, obj: Obj, relaunch: Relaunch) -> bool:
    """The resync's look at a job: True when it waits for a backed-off attempt (whose
    launch is then made now, or scheduled)."""
    attempt = due_attempt(obj)
    if attempt is None:
        return False
    retry_at = statuswriting.parse(obj).status.retry_at
    assert retry_at is not None
    remaining = (retry_at - dt.datetime.now(dt.UTC)).total_seconds()
    namespace, name = statuswriting.name_of(obj)
    if remaining <= 0:
        await relaunch(rt, namespace, name)
    else:
        _schedule(rt, namespace, name, attempt, remaining, relaunch)
    return True
