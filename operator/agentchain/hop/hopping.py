"""One hop, one sequence: capture → decide → spawn → launch → close.

``hop.reconciling`` holds the job's lock and calls the one entry here that does the
job's next missing step: :func:`finish` (its attempt ended), :func:`launch` (not
launched yet, or a retry due) or :func:`chain_on` (ended, its chain step not written).
This module is the only one that chains the engine's steps; each step
(``capturing``, ``deciding``, ``spawning``, ``launching``, ``closing``) does its own I/O
and returns a value, never calling onward.  Read top to bottom, a hop is:

1. **capture** (``finish``): the ended attempt's output and exit, durable in Redis
   before anything acts on them; a replay reads them back and decides the same.
   The verdict is a retry (a new batch Job: **launch** again) or the job's end
   status, which the hop then carries (``Hop.ending``) and step 5 writes, in one
   patch with ``status.next``.  The decision reads the status about to be written.
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
is recorded after its parent's close and the loop in :func:`chain_on` moves on to
it, handing the lock over: the parent's is released once the child's is held, so a
run of skips holds two locks at most, and recursion holds none.  Each entry answers
the names of the jobs that ended, whose dependents ``hop.reconciling`` then starts.
"""

from __future__ import annotations

import dataclasses
import time
from typing import assert_never

from agentchain import faults, metrics
from agentchain.core.hopstate import Ended, Exit, Hop
from agentchain.core.locking import Held
from agentchain.core.rules.outcomes import is_settled, is_terminal
from agentchain.flow import retrying
from agentchain.hop import capturing, closing, deciding, launching, spawning
from agentchain.hop.rules import chains
from agentchain.models.agentjob import NextAction, NextStatus
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import Reason
from agentchain.workspaces import publishing


async def finish(held: Held, hop: Hop, exit: Exit) -> list[str]:
    """The attempt of ``hop``'s job ended as ``exit``: capture it, then retry the job or
    end it and move its chain on; the names of the jobs that ended, for their
    dependents."""
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
            if delay > 0:  # Backoff: recorded; launched when due (``hop.reconciling``).
                await retrying.hold(hop, attempt, message, delay)
                return []
            return await launch(held, hop, attempt=attempt, retry=message)
        case capturing.Ends(status=end):
            return await chain_on(held, hop.ended(end, captured.output))
        case _:
            assert_never(verdict)


async def launch(held: Held, hop: Hop, *, attempt: int = 1, retry: str | None = None) -> list[str]:
    """Launch ``hop``'s job; one that ends instead is recorded and its chain moves on."""
    launched = await launching.launch(hop, attempt=attempt, retry=retry)
    match launched:
        case launching.Launched() | launching.Waiting():
            return []
        case Ended():
            return await chain_on(held, await _record(hop, launched))
        case _:
            assert_never(launched)


async def _record(hop: Hop, ended: Ended) -> Hop:
    """Write the end of a job that ends without running, at once: its end is decided
    from the API's objects, not from Redis, so it goes before its own decision."""
    closed = hop.ended(closing.ended_status(ended))
    await closing.close(closed, None, *ended.conditions)
    return dataclasses.replace(closed, ending=None)


async def chain_on(held: Held, hop: Hop) -> list[str]:
    """Apply the chain's steps from ``hop``'s job, which ended (its end written, or
    decided and carried as ``hop.ending``), through every child that ends without
    running; the names of the jobs that ended, for their dependents."""
    ended = [hop.name]
    following: Hop | None = hop
    while following is not None:
        following = await _step(held, following)
        if following is not None:
            ended.append(following.name)
    return ended


async def _step(held: Held, hop: Hop) -> Hop | None:
    """One decision after ``hop``'s job, applied; the child to go on with, if any.  An
    end not written yet is already in ``hop.obj``: the decision reads it."""
    job = hop.job
    if is_settled(job.status):
        return None
    if job.status.next:  # Decided before a crash; only the completion is missing.
        last = job.status.next[-1]
        done = await closing.complete_chain(hop, last.action, last.message or "")
        await publishing.chain_complete(hop, last.action)
        await closing.close(hop, None, done, complete=True)
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
                await closing.close(hop, entry, complete=True)
                return None
            case chains.Stop() | chains.End():
                await _stop(hop, decision)
                return None
            case chains.Spawn() | chains.Skip() | chains.Refuse():
                if chain_lock is not None:  # The child's lock is taken next: not under it.
                    held.release(hop.namespace, chain_lock)
                return await _continue(held, hop, decision)
            case _:
                assert_never(decision)
    finally:
        if chain_lock is not None:
            held.release(hop.namespace, chain_lock)


async def _stop(hop: Hop, decision: chains.Stop | chains.End) -> None:
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
        await closing.close(hop, entry, branch_ended=True)
        return
    done = await closing.complete_chain(hop, action, decision.message)
    # Its workspace published or released, before the marker that settles it.
    await publishing.chain_complete(hop, action)
    await closing.close(hop, entry, done, complete=True)


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
    held: Held, hop: Hop, decision: chains.Spawn | chains.Skip | chains.Refuse
) -> Hop | None:
    """Spawn and launch the child, then close the parent; the child when it ended."""
    entry = _entry(decision)
    if not isinstance(decision, chains.Refuse):  # The chain goes on: a step may publish.
        await publishing.after_step(hop)
    await held.take(hop.namespace, decision.child.name)
    child = await spawning.spawn(hop, decision, hop.output)
    faults.crashpoint("child-created")
    kid = Hop(hop.rt, child.obj)
    launched = await _start_child(kid)
    if hop.since is not None and isinstance(launched, launching.Launched):
        trace = hop.rt.traces.exemplar(hop.job.status.chain_id)
        metrics.HOP_LATENCY.observe(time.monotonic() - hop.since, exemplar=trace)
    # The marker, last: the child exists (and runs, when it runs at all).
    await closing.close(hop, entry)
    held.release(hop.namespace, hop.name)
    match launched:
        case None:
            return kid if kid.uid and is_terminal(kid.job.status) else None
        case launching.Launched() | launching.Waiting():
            return None
        case Ended():
            # Recorded after its parent's ``next``: a chain it completes never shows
            # a parent without the step that led there.
            return await _record(kid, launched)
        case _:
            assert_never(launched)


async def _start_child(kid: Hop) -> launching.Launch | None:
    """Launch a child the hop just created or met (None: nothing to launch)."""
    if not kid.uid or is_terminal(kid.job.status):
        return None  # Deleted meanwhile, or ended before a crash: its record stands.
    return await launching.launch(kid)
