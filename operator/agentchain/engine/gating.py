"""What may hold a job back just before it starts (issue 16), in order.

1. A stop: the job asks to stop, or its chain was stopped -> it ends Cancelled
   (``stopping.held``).
2. Its concurrency group, for a chain's root job -> queued, refused or superseded
   (``admitting.admit``).
3. The namespace's limit on started jobs (a setting) -> queued (``admitting.admit_job``).

One call site in ``starting`` runs them, under the job's lock, before anything is
created for it.
"""

from __future__ import annotations

from agentchain.engine import admitting, records, stopping
from agentchain.engine.runtime import Runtime


async def held(rt: Runtime, obj: records.Obj, init: records.Obj) -> bool:
    """Whether the job must not start now; ``init`` (its first status fields, not yet
    written) is written by whichever gate holds it, or updated for the launch."""
    if await stopping.held(rt, obj, init):
        return True
    if await admitting.admit(rt, obj, init):
        return True
    return await admitting.admit_job(rt, obj, init)
