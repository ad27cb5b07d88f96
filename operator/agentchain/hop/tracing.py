"""What the hop's steps need to record their spans (``traces/rules/steps``), and the
root span of a chain whose trigger recorded none.

Each step records its own span, under the ended job's: an attempt's and its capture's
once the capture is stored and the verdict known, before the retry is launched or the
chain moves on (``capturing.trace``); the decision's right after it is made, before
anything acts on it (``deciding``); the publish's where its Job is created
(``workspaces/publishing``); the job's own where its end is recorded (``closing``).
All come before the patch that settles what they describe, so a crash in between
replays the step, which records the same spans again under the same ids: the outbox
keeps them once (``traces/outbox``).  Nothing is built when tracing is off.
"""

from __future__ import annotations

import time

from agentchain import models
from agentchain.core import statuswriting
from agentchain.core.hopstate import Hop
from agentchain.hop.rules import chains
from agentchain.store import sealing
from agentchain.traces.rules import spans
from agentchain.traces.rules.steps import JobRef


def job_ref(hop: Hop) -> JobRef | None:
    """``hop``'s job as the parent of its steps' spans; None when tracing is off or its
    chain cannot be read (in no chain, so in no trace)."""
    if not hop.rt.traces.enabled:
        return None
    try:
        chain_id = statuswriting.position(hop.obj, hop.rt.operator_keys).chain_id
    except chains.ChainMetadataError:
        return None
    return JobRef(hop.namespace, hop.name, chain_id, hop.job.spec.agent_role)


async def root(hop: Hop, chain_id: str) -> None:
    """The root span of the chain ``hop``'s root job started, named after what started
    it (``spans.started_root``), at the job's creation: recorded when the root job ends,
    for a chain whose trigger recorded none (a trigger that did is kept: same id)."""
    meta, spec = hop.obj["metadata"], hop.job.spec
    event = spec.event
    # Which comment's retry made it is an annotation: believed only on a job whose event
    # the operator sealed, as on the job the retry command created.
    annotations = meta.get("annotations") or {}
    retry_of = annotations.get(models.RETRY_OF)
    vouched = retry_of is not None and sealing.vouched(hop.rt.operator_keys, hop.obj)
    root = spans.started_root(
        chain_id,
        hop.name,
        spec.origin,
        spans.created_ns(
            meta.get("creationTimestamp"), annotations.get(models.CREATED_NS), time.time_ns()
        ),
        event.schedule if event else None,
        event.scheduled_at if event else None,
        retry_of=str(retry_of) if vouched else None,
    )
    await hop.rt.traces.record(root)
