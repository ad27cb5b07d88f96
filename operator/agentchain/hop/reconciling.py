"""One way into the hop: every event about an AgentJob ends in :func:`reconcile`.

As controller-runtime's ``Reconcile(request)``: whatever happened (the AgentJob's own
watch event, its batch Job's or its pod's, an AiAgent's, a freed slot, a retry's
timer, the periodic resync), the caller names the AgentJob and this reads what exists
and does the next missing step, under the job's lock:

- a stop its annotations ask for: claimed first (``stopping``, under its own hold of
  the lock), then ended below like any recorded ending;
- settled (decided, or its branch ended): nothing;
- ended, its chain step not written (a crash between its end and its marker):
  ``hopping.chain_on``;
- a retry waiting out its backoff (``retryAt``): launched once due, else a timer
  that reconciles it then (``flow/retrying``);
- not launched: ``hopping.launch`` (the gates, its dependencies, its agent);
- launched: its attempt as the watches' indexes show it (``attempts.observe``): ended,
  ``hopping.finish``; its agent running while the job says ``Pending``, ``Running``;
  else the ending recorded in Redis, if any (a stop's claim, or a capture a crash
  left unacted on), ``hopping.finish`` again, which reads it back.

What it reads costs no request on a hop: the AgentJob as of this process's last write
(``attempts.current``), the Job and pods from the watches (``core.podowners``).  Every
step is idempotent (derived names, AlreadyExists, the marker written last), so an
event that brings nothing new, a replay after a crash and the resync all end in the
same objects; nothing here remembers which events were handled.  Once the lock is
released, the jobs waiting on any job that ended here are reconciled too.
"""

from __future__ import annotations

import dataclasses
import time

from agentchain.core import statuswriting
from agentchain.core.catalog import by_trigger
from agentchain.core.hopstate import Exit, Hop, Obj
from agentchain.core.locking import Held
from agentchain.core.rules.outcomes import is_settled, is_terminal
from agentchain.core.runtime import Runtime
from agentchain.flow import admitting, retrying
from agentchain.hop import attempts, hopping, stopping
from agentchain.models.agentjob import TERMINAL_PHASES


def wants_start(rt: Runtime, obj: Obj) -> bool:
    """Whether a watched job may need starting: neither launched nor ended, as the
    watched body says and as our own last write to it says (the child a hop launched
    shows up new on the watch after its launch was written)."""
    status = obj.get("status") or {}
    if status.get("jobName") or status.get("phase") in TERMINAL_PHASES:
        return False
    meta = obj.get("metadata") or {}
    written = rt.unsettled.current(str(meta.get("namespace")), str(meta.get("name")))
    return written is None or not (written.get("status") or {}).get("jobName")


async def reconcile(rt: Runtime, namespace: str, name: str) -> None:
    """Do the next missing step of AgentJob ``name``, from what exists now."""
    known = _known(rt, namespace, name)
    if rt.unsettled.is_settled(namespace, name) or _settled(known, _answer(rt, known)):
        return  # Decided for good: nothing of it is left to do.
    since = time.monotonic()
    if known is not None and stopping.wants_stop(known):
        await stopping.stop(rt, known)  # Claimed: the hop below ends it from the claim.
    elif known is not None and await _quiet(rt, known):
        return  # Launched, and nothing new about its attempt: no read, no lock.
    async with rt.locks.holding(namespace, name) as held:
        obj = await _now(rt, namespace, name)
        ended = [] if obj is None else await _next_step(held, Hop(rt, obj), since)
    await _wake(rt, namespace, ended)


def _known(rt: Runtime, namespace: str, name: str) -> Obj | None:
    """The newest body of the job this process knows without a read (None: not
    watched): as of our last write while the watch shows no one else's after it
    (``Unsettled.current``), else the watched body.  A watched body older than what
    is true only makes a look do more: whatever it lacks arrives as an event later."""
    return rt.unsettled.current(namespace, name) or rt.unsettled.watched(namespace, name)


def _answer(rt: Runtime, known: Obj | None) -> Obj | None:
    """Our last write's answer to the job ``known`` is, if it was that object's: the
    answer to a deleted namesake's write (a namespace deleted and created again, a
    deletion the watch missed) says nothing of a new object."""
    if known is None:
        return None
    meta = known.get("metadata") or {}
    answer = rt.writes.answer(str(meta.get("namespace")), str(meta.get("name")))
    if answer is None or (answer.get("metadata") or {}).get("uid") != meta.get("uid"):
        return None
    return answer


def _settled(*bodies: Obj | None) -> bool:
    """Whether any of ``bodies`` says the job is settled: once settled, it stays so
    (our own last write's answer says so before the watch does)."""
    for obj in bodies:
        try:
            if obj is not None and is_settled(statuswriting.parse(obj).status):
                return True
        except ValueError:
            continue  # Unreadable: read again under the lock.
    return False


async def _quiet(rt: Runtime, obj: Obj) -> bool:
    """Whether the launched job ``obj`` has nothing to act on: its attempt neither ended
    nor started running as the indexes show it, no ending recorded in Redis, no retry
    waiting, not ended."""
    try:
        status = statuswriting.parse(obj).status
    except ValueError:
        return False  # Unreadable: read again under the lock.
    if is_terminal(status) or not status.job_name or retrying.due_attempt(obj) is not None:
        return False
    if attempts.look(rt, obj) is not None:
        return False
    namespace, name = statuswriting.name_of(obj)
    uid = str(obj["metadata"].get("uid", ""))
    recorded = await rt.outputs.get_capture(namespace, name, uid)
    return recorded is None or recorded.attempt != (status.attempt or 1)


async def _now(rt: Runtime, namespace: str, name: str) -> Obj | None:
    """The job as of now: as of our last write when the watch knows nothing newer; the
    watched body of a job not launched that this process never wrote to (nothing
    newer can be known; acting on a stale one is only redone idempotently); else read."""
    if rt.writes.last(namespace, name) is None:
        watched = rt.unsettled.watched(namespace, name)
        if watched is not None and not (watched.get("status") or {}).get("jobName"):
            return watched
    return await attempts.current(rt, namespace, name)


async def _next_step(held: Held, hop: Hop, since: float) -> list[str]:
    """The resync's checklist, in order; the names of the jobs that ended.  ``since``:
    when this look began, where a hop's latency runs from when it finds an attempt's
    end."""
    status = hop.job.status
    if is_settled(status):
        return []
    if is_terminal(status):
        return await hopping.chain_on(held, hop)
    if retrying.due_attempt(hop.obj) is not None:
        return await _backed_off(held, hop)
    if not status.job_name:
        ended = await hopping.launch(held, hop)
        if ended or not hop.job.status.job_name:
            return ended
    return await _attempt(held, hop, since)


async def _attempt(held: Held, hop: Hop, since: float) -> list[str]:
    """The launched attempt: ended, running, or as recorded in Redis."""
    seen = await attempts.observe(hop.rt, hop.obj)
    if isinstance(seen, attempts.Running):
        await attempts.mark_running(hop.rt, hop.namespace, hop.name, seen.pod, hop.obj)
    if not isinstance(seen, Exit):
        attempt = hop.job.status.attempt or 1
        recorded = await hop.rt.outputs.get_capture(hop.namespace, hop.name, hop.uid)
        if recorded is None or recorded.attempt != attempt:
            return []
        seen = Exit(attempt, None, None)  # Its ending is read back from the record.
    ended = await hopping.finish(held, dataclasses.replace(hop, since=since), seen)
    if retrying.due_attempt(hop.obj) is not None:  # A retry to wait for: its timer.
        return await _backed_off(held, hop)
    return ended


async def _backed_off(held: Held, hop: Hop) -> list[str]:
    """A retry that waits out its backoff: launched once due, else looked at then."""
    attempt = retrying.due_attempt(hop.obj)
    assert attempt is not None
    left = retrying.wait_left(hop.obj)
    if left > 0:
        retrying.schedule(hop.rt, hop.namespace, hop.name, attempt, left, reconcile)
        return []
    message = f"Attempt {attempt} after its backoff"
    return await hopping.launch(held, hop, attempt=attempt, retry=message)


async def agents_changed(rt: Runtime, namespace: str) -> None:
    """Reconcile the jobs of ``namespace`` waiting for an AiAgent that the catalog now
    has (one was created, or renamed to their ``agentRole``), not at the next resync.

    From the watch-fed index and the catalog alone: a namespace's other waiting jobs
    cost nothing.  A disabled or ambiguous agent ends the job (``launching``).
    """
    entries = rt.agents.cached(namespace)
    for item in rt.unsettled.waiting_for_agent(namespace):
        role = (item.get("spec") or {}).get("agentRole")
        if isinstance(role, str) and by_trigger(entries, role) is not None:
            await reconcile(rt, namespace, str(item["metadata"]["name"]))


async def _wake(rt: Runtime, namespace: str, ended: list[str]) -> None:
    """Reconcile the Waiting jobs that depend on the ``ended`` ones now, not at the next
    resync, and the jobs a freed concurrency slot let in.

    They come from the watch-fed index, not a list of every AgentJob per ended job;
    one whose Waiting status the watch has not delivered yet is the resync's.
    """
    for name in ended:
        for item in rt.unsettled.waiting_on(namespace, name):
            await reconcile(rt, namespace, str(item["metadata"]["name"]))
    for name in admitting.due(rt, namespace):  # Let in by a freed concurrency slot.
        await reconcile(rt, namespace, name)
