"""Spawning: create the child AgentJob a decision names, with its ``<chain-context>``.

The body is ``hop.rules.childspec.build_child``'s; the name is derived from the parent
and the agent, so a replay's create answers AlreadyExists and nothing is doubled.
The context block is built from the parent's captured output (handed over by the
capture, or read back from Redis on a replay), neutralised and bounded by
``prompts.rules.chaincontext``.  Starting the child is not this step's business.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from agentchain import metrics, models
from agentchain.core import catalog
from agentchain.core.hopstate import Hop, Obj, Output
from agentchain.core.rules import provenance
from agentchain.hop.rules import chains, childspec
from agentchain.kube import events, resources
from agentchain.models.aiagent import AiAgent, ContextWindow
from agentchain.models.conditions import Reason
from agentchain.prompts.rules import chaincontext
from agentchain.store import sealing


@dataclass(frozen=True)
class Child:
    """The child as its create answered; ``created`` False: it existed already."""

    obj: Obj
    created: bool


async def spawn(hop: Hop, decision: childspec.Child, output: Output | None) -> Child:
    """Create ``decision``'s child of ``hop``'s job (``output``: the job's, if at hand)."""
    agents = hop.rt.agents.cached(hop.namespace)
    block = await _context_for(hop, decision.child, agents, output)
    parent = hop.job.spec
    parent = parent.model_copy(update={"event": provenance.handed_on(parent.event, hop.vouched)})
    child = childspec.build_child(hop.namespace, parent, decision, block)
    if hop.rt.traces.enabled:  # When it was asked for, by this clock: its span starts there.
        child["metadata"].setdefault("annotations", {})[models.CREATED_NS] = str(time.time_ns())
    body = sealing.seal_job(hop.rt.operator_keys, child)
    obj, created = await resources.create(hop.namespace, resources.AGENTJOBS, body)
    if created:
        await _count(hop, decision)
    return Child(obj, created)


async def _count(hop: Hop, decision: childspec.Child) -> None:
    match decision:
        case chains.Spawn(notify=True):
            metrics.FAILURE_NOTIFICATIONS.labels(hop.namespace, decision.child.agent).inc()
            message = decision.message
            await events.emit(hop.obj, "Warning", Reason.CHAIN_NOTIFY, message, key="notify")
        case chains.Refuse(reason=Reason.LOOP_DETECTED):
            metrics.LOOPS_BLOCKED.labels(hop.namespace).inc()
        case chains.Refuse(reason=Reason.MAX_CHAIN_DEPTH_EXCEEDED):
            metrics.DEPTH_REFUSALS.labels(hop.namespace).inc()
        case _:
            pass


async def _context_for(
    hop: Hop, plan: chains.ChildPlan, agents: list[catalog.Entry], output: Output | None
) -> str:
    """The child's <chain-context>: the parent's output, or its hand-off section."""
    job = hop.job
    if job.status.phase == "Skipped":
        return job.spec.chain_context or ""  # Pass the last real output across the skip.
    if output is None:
        output = await _stored(hop)
    window: ContextWindow = "head" if plan.context_window == "head" else "tail"
    if output.text is None:
        lost = output.lost or job.status.message or "The parent's output was not captured."
        return chaincontext.chain_context_block(
            None, window=window, lost_reason=lost, workspace=output.workspace
        )
    found = catalog.by_trigger(agents, job.spec.agent_role)
    heading = found.spec.handoff_heading if isinstance(found, AiAgent) else None
    # Up to a megabyte of output to parse: in a thread, so the loop that serves the
    # webhook and /healthz is not held.
    return await asyncio.to_thread(
        chaincontext.child_block,
        output.text,
        window=window,
        handoff_heading=heading,
        workspace=output.workspace,
    )


async def _stored(hop: Hop) -> Output:
    record = await hop.rt.outputs.get(hop.namespace, hop.name, hop.uid)
    if record is None:
        return Output(None)
    if record.available:
        return Output(record.text, workspace=record.workspace)
    # Never an empty string for lost output.
    return Output(None, record.unavailable_reason, record.workspace)
