"""Retry backoff: attempt N+1 starts when its wait is over, also after a restart.

``capturing.verdict`` decides a retry and its wait (``flow/rules/retries.delay_before``).
With no wait ``hop.hopping`` launches the next attempt at once, as before.  With a
wait, :func:`hold` records the attempt to come and when it is due in the job's status
(``attempt``, ``retryAt``, phase ``Pending``, reason ``Retrying``) -- durable before
anything waits.  ``hop.reconciling`` finds that status (:func:`due_attempt`) right
after, or at any later look (an event, the resync after a restart): it launches the
attempt once it is due (:func:`wait_left`), else sets a timer in this process
(:func:`schedule`) that looks at the job again then.  The wait is never lost, and
never doubled, because the look re-reads the job under its lock and the attempt's
batch Job has a deterministic name.  Events of the failed attempt are ignored
meanwhile, as for any earlier attempt (its number is below ``status.attempt``).
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
"""Look at the job again, to launch its due attempt (``reconciling.reconcile``)."""


async def hold(hop: Hop, attempt: int, message: str, delay: float) -> None:
    """Record that ``attempt`` starts in ``delay`` seconds (``retryAt``)."""
    due = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay)
    text = f"{message}; it starts in {delay:g}s (at {due.isoformat()})"
    status = {"phase": "Pending", "reason": Reason.RETRYING, "message": text, "podName": None}
    await hop.patch(typed({**status, "attempt": attempt, "retryAt": due.isoformat()}))
    await events.emit(hop.obj, "Warning", Reason.RETRYING, text, key=f"retry:{attempt}")


def schedule(
    rt: Runtime, namespace: str, name: str, attempt: int, delay: float, relaunch: Relaunch
) -> None:
    """Call ``relaunch`` for the job in ``delay`` seconds (once per attempt)."""
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


def wait_left(obj: Obj) -> float:
    """Seconds until the backed-off attempt of ``obj`` is due (0 or less: due now)."""
    retry_at = statuswriting.parse(obj).status.retry_at
    if retry_at is None:
        return 0.0
    return (retry_at - dt.datetime.now(dt.UTC)).total_seconds()
