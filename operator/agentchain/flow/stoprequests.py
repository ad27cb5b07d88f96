"""Asking jobs and chains to stop: the annotations, and the chain stop record.

The API, the annotation a user writes and a concurrency group's ``cancel-in-progress``
all ask the same way: ``flow/rules/stoprules.annotations_for`` on the AgentJob, which the
engine applies (``stopping`` for a running job, ``gating`` for one not started).  A
chain stop is recorded in Redis first, so a job of that chain that would start later
(spawned by a job that ended just before) is cancelled instead.
"""

from __future__ import annotations

from agentchain.core import statuswriting
from agentchain.core.rules.outcomes import is_terminal
from agentchain.core.runtime import Runtime
from agentchain.flow.rules import stoprules
from agentchain.flow.stoprecords import StopStore
from agentchain.kube import resources

Obj = statuswriting.Obj


async def request_stop(namespace: str, name: str, request: stoprules.StopRequest) -> Obj | None:
    """Ask a job to stop (its annotations); None when it is gone."""
    return await resources.patch_metadata(
        namespace,
        resources.AGENTJOBS,
        name,
        labels={},
        annotations=stoprules.annotations_for(request),
    )


async def request_chain_stop(
    rt: Runtime, namespace: str, chain_id: str, jobs: list[Obj], request: stoprules.StopRequest
) -> list[str]:
    """Stop a chain: recorded first, then each live job asked; the names asked."""
    store = StopStore(rt.redis)
    await store.stop_chain(namespace, chain_id, request.by, request.reason, request.successor)
    asked = []
    for obj in jobs:
        if not is_terminal(statuswriting.parse(obj).status):
            await request_stop(namespace, obj["metadata"]["name"], request)
            asked.append(str(obj["metadata"]["name"]))
    return asked


async def pending_stop(rt: Runtime, obj: Obj, chain_id: str | None) -> stoprules.StopRequest | None:
    """The stop a job about to start is under: its own, or its chain's."""
    request = stoprules.requested(obj["metadata"].get("annotations"))
    if request is not None or not chain_id:
        return request
    found = await StopStore(rt.redis).chain_stopped(obj["metadata"]["namespace"], chain_id)
    return stoprules.StopRequest.from_record(found) if found is not None else None
