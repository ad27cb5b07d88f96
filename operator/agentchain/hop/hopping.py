"""One hop, one sequence: capture → decide → spawn → launch → close.

This module is the only one that chains the engine's steps and the only one that
takes locks; each step (``capturing``, ``deciding``, ``spawning``, ``launching``,
``closing``) does its own I/O and returns a value, never calling onward.  Read top
to bottom, a hop is:

1. **capture** (``finish``): the ended attempt's output and exit, durable in Redis
   before anything acts on them; a replay reads them back and decides the same.
   The verdict is a retry (a new batch Job: **launch** again) or the job's end
   status, which is *not* written yet: it goes out in step 5, in one patch with
   ``status.next``.  The decision works from the status about to be written.
2. **decide**: ``hop.rules.chains.next_step`` on recorded facts: ``Spawn``, ``Skip``,
   ``Refuse``, ``Stop`` or ``End``, matched exhaustively below.
3. **spawn**: the child AgentJob under its deterministic name (AlreadyExists: done),
   its lock taken first (a parent's lock, then its child's: never the other way), so
   its own watch event waits and then finds it started.
4. **launch** the child: its batch Job and Secret, or why it does not run.
5. **close** the parent: end status and ``status.next``, the marker, last.  Then
   ``Stop``/``End`` complete the chain, publishing or releasing its workspace
   (``publishing``) before the patch that settles it, unless another of the chain's
   jobs is still open (a delegated job, or the one that delegated): then only this
   job's branch ends (``branchEnded``), and the last open job completes the chain.
   The chain's lock is held from the decision to the marker, so that of two branches
   ending together exactly one completes it.  A chain that goes on
   (``Spawn``, ``Skip``) after a job whose AiAgent asks (``publishAfterStep``) starts
   that step's publish Job before step 3, so before the marker too: a replay creates
   it again under its one name (AlreadyExists).

A child that ends without running (a Skipped or refused record, or a failed start)
is recorded after its parent's close and the loop in :func:`_chain_on` moves on to
it, handing the lock over: the parent's is released once the child's is held, so a
run of skips holds two locks at most, and recursion holds none.  After the locks
are released, jobs waiting (``dependsOn``) on any job that ended here are started.
"""

from __future__ import annotations

import dataclasses
import time
from typing import assert_never

from agentchain import faults, metrics
from agentchain.core import statuswriting
from agentchain.core.catalog import by_trigger
from agentchain.core.hopstate import Ended, Exit, ExitReader, Hop, Obj, Output
from agentchain.core.locking import Held
from agentchain.core.rules.outcomes import is_settled, is_terminal
from agentchain.core.runtime import Runtime
from agentchain.flow import admitting, retrying
from agentchain.hop import capturing, closing, deciding, launching, spawning
from agentchain.hop.rules import chains
from agentchain.kube import resources
from agentchain.models.agentjob import TERMINAL_PHASES, AgentJobStatus, NextAction, NextStatus
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import Reason
from agentchain.workspaces import publishing


def _key(obj: Obj) -> tuple[str, str, str]:
    namespace, name = statuswriting.name_of(obj)
    return namespace, name, str(obj["metadata"].get("uid"))


def wants_start(rt: Runtime, obj: Obj) -> bool:
    """Whether a watched job may need starting: not launched, not ended, not by us."""
    status = obj.get("status") or {}
    if status.get("jobName") or status.get("phase") in TERMINAL_PHASES:
        return False
    return _key(obj) not in rt.started


async def start(rt: Runtime, obj: Obj) -> None:
    """Launch ``obj`` (as watched), unless this process already did."""
    namespace, name = statuswriting.name_of(obj)
    async with rt.locks.holding(namespace, name) as held:
        if _key(obj) in rt.started:
            return  # Started by its parent's hop while this caller waited for the lock.
        fresh = await _fresh(rt, obj)
        if fresh is None or is_terminal(statuswriting.parse(fresh).status):
            return
        ended = await _launch(held, Hop(rt, fresh))
    await _wake(rt, namespace, ended)


async def _fresh(rt: Runtime, obj: Obj) -> Obj | None:
    """``obj`` as of now: the watched body itself when this process never wrote to it
    (a new job: nothing newer can be known; acting on a stale one is only redone
    idempotently), else the body of our last write, or a read."""
    namespace, name = statuswriting.name_of(obj)
    if rt.writes.last(namespace, name) is None:
        return dict(obj)  # Our status writes replace its "status" on this copy only.
    return await current(rt, namespace, name)


async def progress(rt: Runtime, obj: Obj) -> None:
    """Apply the chain's next step after ``obj``, which ended (the resync's entry)."""
    namespace, name = statuswriting.name_of(obj)
    async with rt.locks.holding(namespace, name) as held:
        fresh = await resources.get(namespace, resources.AGENTJOBS, name)
        if fresh is None or not is_terminal(statuswriting.parse(fresh).status):
            return
        ended = await _chain_on(held, Hop(rt, fresh), None, None)
    await _wake(rt, namespace, ended)


async def finish(
    rt: Runtime, namespace: str, name: str, batch_uid: str, exit: Exit | ExitReader
) -> None:
    """An attempt of the job (batch Job ``batch_uid``) ended as ``exit`` (read only once
    the lock is held, when it costs a request): retry it, or end it and move the
    chain on.  Once recorded, later events of that batch Job cost nothing."""
    since = time.monotonic()
    async with rt.locks.holding(namespace, name) as held:
        if (namespace, batch_uid) in rt.finished:
            return  # Recorded while this caller waited for the lock.
        if not isinstance(exit, Exit):
            exit = await exit()
        obj = await current(rt, namespace, name)
        hop = Hop(rt, obj, since) if obj is not None else None
        ended = [] if hop is None else await _end(held, hop, exit)
        if batch_uid:  # Recorded (or nothing left to record): later events are no-ops.
            rt.finished.add((namespace, batch_uid))
    await _wake(rt, namespace, ended)


async def _end(held: Held, hop: Hop, exit: Exit) -> list[str]:
    if exit.owner_uid and exit.owner_uid != hop.uid:
        return []  # The Job of an earlier AgentJob of this name (deleted, created again).
    status = hop.job.status
    if is_terminal(status):
        return await _chain_on(held, hop, None, None)
    if exit.attempt < (status.attempt or 1):
        return []  # An earlier attempt's late event: that attempt was already retried.
    return await _finish(held, hop, exit)


async def current(rt: Runtime, namespace: str, name: str) -> Obj | None:
    """The AgentJob as of now: from the watch when that is as of our last write to it
    (one read less per hop), else read."""
    cached = rt.unsettled.current(namespace, name)
    if cached is not None:
        return cached
    return await resources.get(namespace, resources.AGENTJOBS, name)


async def _finish(held: Held, hop: Hop, exit: Exit) -> list[str]:
    began = time.time_ns()
    captured = await capturing.capture(hop, exit)
    capture_ns = (began, time.time_ns())
    found = await hop.rt.agents.by_trigger(hop.namespace, hop.job.spec.agent_role)
    agent = found if isinstance(found, AiAgent) else None  # Ambiguous: no retry.
    verdict = capturing.verdict(hop, captured, agent)
    await capturing.trace(hop, exit, captured, verdict, capture_ns)  # Before acting on it.
    match verdict:
        case capturing.Retry(attempt=attempt, why=why, delay=delay):
            total = agent.spec.backoff_limit + 1 if agent else attempt
            message = f"Attempt {attempt} of {total} after attempt {attempt - 1} {why}"
            if delay > 0:  # Backoff: launched by ``relaunch`` when due.
                await retrying.hold(hop, attempt, message, delay, relaunch)
                return []
            return await _launch(held, hop, attempt=attempt, retry=message)
        case capturing.Ends(status=end):
            return await _chain_on(held, hop, end, captured.output)
        case _:
            assert_never(verdict)


async def relaunch(rt: Runtime, namespace: str, name: str) -> None:
    """Launch the attempt a retry backoff held back, now that it is due (``retrying``)."""
    async with rt.locks.holding(namespace, name) as held:
        fresh = await resources.get(namespace, resources.AGENTJOBS, name)
        attempt = retrying.due_attempt(fresh) if fresh is not None else None
        if fresh is None or attempt is None:
            return  # Stopped, deleted or launched meanwhile.
        message = f"Attempt {attempt} after its backoff"
        ended = await _launch(held, Hop(rt, fresh), attempt=attempt, retry=message)
    await _wake(rt, namespace, ended)


async def _launch(held: Held, hop: Hop, *, attempt: int = 1, retry: str | None = None) -> list[str]:
    """Launch ``hop``'s job; one that ends instead is recorded and its chain moves on."""
    launched = await launching.launch(hop, attempt=attempt, retry=retry)
    match launched:
        case launching.Launched():
            hop.rt.started.add(_key(hop.obj))
            return []
        case launching.Waiting():
            return []
        case Ended():
            await closing.close(hop, closing.ended_status(launched), None, *launched.conditions)
            hop.rt.started.add(_key(hop.obj))
            return await _chain_on(held, hop, None, None)
        case _:
            assert_never(launched)


async def _chain_on(
    held: Held, hop: Hop, end: AgentJobStatus | None, output: Output | None
) -> list[str]:
    """Apply the chain's steps from ``hop``'s job, which ended (``end``: its end status,
    not written yet), through every child that ends without running; the names of
    the jobs that ended, for their dependents."""
    ended = [hop.name]
    following: Hop | None = hop
    while following is not None:
        following = await _step(held, following, end, output)
        end, output = None, None
        if following is not None:
            ended.append(following.name)
    return ended


async def _step(
    held: Held, hop: Hop, end: AgentJobStatus | None, output: Output | None
) -> Hop | None:
    """One decision after ``hop``'s job, applied; the child to go on with, if any."""
    if end is not None:  # Decide from the status about to be written.
        status = {**(hop.obj.get("status") or {}), **statuswriting.fields(end)}
        hop = dataclasses.replace(hop, obj={**hop.obj, "status": status})
    job = hop.job
    if is_settled(job.status):
        return None
    if job.status.next:  # Decided before a crash; only the completion is missing.
        last = job.status.next[-1]
        done = await closing.complete_chain(hop, last.action, last.message or "")
        await publishing.chain_complete(hop, last.action)
        await closing.close(hop, None, None, done, complete=True)
        return None
    # The chain's lock, taken last and nothing taken under it, from the decision (which
    # reads which of the chain's jobs are still open) to the marker: of two branches
    # ending together, exactly one finds the other decided and completes the chain.
    chain_lock = deciding.chain_lock(hop)
    if chain_lock is not None:
        await held.take(hop.namespace, chain_lock)
    try:
        decision = await deciding.decide(hop)
        match decision:
            case deciding.Broken(message=message):
                reason = Reason.INVALID_CHAIN_METADATA
                entry = NextStatus(action="none", reason=reason, message=message)
                # The patch that settles the job comes first and alone: no chain can be
                # read to publish, release or record a hop in, and anything raising before
                # it would leave the job unsettled, failing again at every resync.
                await closing.close(hop, end, entry, complete=True)
                return None
            case chains.Stop() | chains.End():
                await _stop(hop, end, decision)
                return None
            case chains.Spawn() | chains.Skip() | chains.Refuse():
                if chain_lock is not None:  # The child's lock is taken next: not under it.
                    held.release(hop.namespace, chain_lock)
                return await _continue(held, hop, end, output, decision)
            case _:
                assert_never(decision)
    finally:
        if chain_lock is not None:
            held.release(hop.namespace, chain_lock)


async def _stop(hop: Hop, end: AgentJobStatus | None, decision: chains.Stop | chains.End) -> None:
    """The chain ends here: completed (Redis, Event) before the job's one last patch;
    or, while another of its jobs is open, only this job's branch ends (its ``next``
    and ``branchEnded``: its slot, workspace and completion wait for the last job)."""
    action: NextAction
    match decision:
        case chains.Stop(reason=reason):
            action = "stopped"
        case chains.End():
            action = "none"
            reason = Reason.CHAIN_COMPLETE if decision.completes else Reason.BRANCH_ENDED
    entry = NextStatus(action=action, reason=reason, message=decision.message)
    if not decision.completes:
        await closing.close(hop, end, entry, branch_ended=True)
        return
    done = await closing.complete_chain(hop, action, decision.message)
    # Its workspace published or released, before the marker that settles it.
    await publishing.chain_complete(hop, action)
    await closing.close(hop, end, entry, done, complete=True)


def _entry(decision: chains.Spawn | chains.Skip | chains.Refuse) -> NextStatus:
    """The parent's ``status.next`` for a decision that makes a child."""
    action: NextAction
    match decision:
        case chains.Spawn():
            action, reason = "spawned", Reason.CHILD_SPAWNED
        case chains.Skip(reason=reason):
            action = "skipped"
        case chains.Refuse(reason=reason):
            action = "refused"
    child = decision.child
    return NextStatus(
        action=action, agent=child.agent, child=child.name, reason=reason, message=decision.message
    )


async def _continue(
    held: Held,
    hop: Hop,
    end: AgentJobStatus | None,
    output: Output | None,
    decision: chains.Spawn | chains.Skip | chains.Refuse,
) -> Hop | None:
    """Spawn and launch the child, then close the parent; the child when it ended."""
    entry = _entry(decision)
    if not isinstance(decision, chains.Refuse):  # The chain goes on: a step may publish.
        await publishing.after_step(hop)
    await held.take(hop.namespace, decision.child.name)
    child = await spawning.spawn(hop, decision, output)
    faults.crashpoint("child-created")
    kid = Hop(hop.rt, child.obj)
    launched = await _start_child(kid)
    if hop.since is not None and isinstance(launched, launching.Launched):
        trace = hop.rt.traces.exemplar(hop.job.status.chain_id)
        metrics.HOP_LATENCY.observe(time.monotonic() - hop.since, exemplar=trace)
    # The marker, last: the child exists (and runs, when it runs at all).
    await closing.close(hop, end, entry)
    held.release(hop.namespace, hop.name)
    match launched:
        case None:
            return kid if kid.uid and is_terminal(kid.job.status) else None
        case launching.Launched() | launching.Waiting():
            return None
        case Ended():
            # Recorded after its parent's ``next``: a chain it completes never shows
            # a parent without the step that led there.
            await closing.close(kid, closing.ended_status(launched), None, *launched.conditions)
            hop.rt.started.add(_key(kid.obj))
            return kid
        case _:
            assert_never(launched)


async def _start_child(kid: Hop) -> launching.Launch | None:
    """Launch a child the hop just created or met (None: nothing to launch)."""
    if not kid.uid or is_terminal(kid.job.status):
        return None  # Deleted meanwhile, or ended before a crash: its record stands.
    launched = await launching.launch(kid)
    if isinstance(launched, launching.Launched):
        kid.rt.started.add(_key(kid.obj))
    return launched


async def agents_changed(rt: Runtime, namespace: str) -> None:
    """Start the jobs of ``namespace`` waiting for an AiAgent that the catalog now has
    (one was created, or renamed to their ``agentRole``), not at the next resync.

    From the watch-fed index and the catalog alone: a namespace's other waiting jobs
    cost nothing.  A disabled or ambiguous agent ends the job (``launching``).
    """
    entries = rt.agents.cached(namespace)
    for item in rt.unsettled.waiting_for_agent(namespace):
        role = (item.get("spec") or {}).get("agentRole")
        if isinstance(role, str) and by_trigger(entries, role) is not None:
            await start(rt, item)


async def _wake(rt: Runtime, namespace: str, ended: list[str]) -> None:
    """Start Waiting jobs that depend on the ``ended`` ones now, not at the next resync.

    They come from the watch-fed index, not a list of every AgentJob per ended job;
    one whose Waiting status the watch has not delivered yet is the resync's.
    """
    for name in ended:
        for item in rt.unsettled.waiting_on(namespace, name):
            await start(rt, item)
    for name in admitting.due(rt, namespace):  # Let in by a freed concurrency slot.
        let_in = await resources.get(namespace, resources.AGENTJOBS, name)
        if let_in is not None:
            await start(rt, let_in)
