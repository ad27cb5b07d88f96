"""Batch Jobs seen without an owner: adopted by their AgentJob, or deleted.

Chain children's batch Jobs are created ownerless and owned right after
(``starting.create_unowned``); the creator handles its own, and a replay of the
parent's step adopts the one a crash left behind.  Any other ownerless Job with our
label is settled here, from the Job watch and, while it waits for its AgentJob,
from the resync (``policy.orphans.verdict`` decides).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any

from agentchain import models
from agentchain.engine import records, starting
from agentchain.engine.locking import lock_for
from agentchain.engine.runtime import Runtime
from agentchain.kube import resources, workloads
from agentchain.policy.orphans import GRACE_SECONDS, verdict

log = logging.getLogger(__name__)
Obj = dict[str, Any]


def is_orphan(job: Obj) -> bool:
    meta = job.get("metadata") or {}
    return not meta.get("ownerReferences") and not meta.get("deletionTimestamp")


def _age(job: Obj) -> float:
    created = (job.get("metadata") or {}).get("creationTimestamp")
    if not created:
        return 0.0
    stamp = dt.datetime.fromisoformat(str(created).replace("Z", "+00:00"))
    return (dt.datetime.now(dt.UTC) - stamp).total_seconds()


async def settle(rt: Runtime, job: Obj) -> None:
    """Adopt, delete or look again later at an ownerless batch Job of ours."""
    meta = job["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    owner = (meta.get("labels") or {}).get(models.AGENTJOB_LABEL)
    if not owner or starting.created_ahead(namespace, name):
        return  # Not ours, or its creator in this process is owning it right now.
    async with lock_for(namespace, owner):  # After any start of the AgentJob here.
        fresh = await workloads.get_job(namespace, name)
        if fresh is None or not is_orphan(fresh) or fresh["metadata"]["uid"] != meta["uid"]:
            rt.orphans.pop((namespace, name), None)
            return
        agentjob = await resources.get(namespace, resources.AGENTJOBS, owner)
        decided = verdict(name, _age(fresh), agentjob)
        if decided == "wait":
            rt.orphans[(namespace, name)] = time.monotonic() + GRACE_SECONDS
            return
        rt.orphans.pop((namespace, name), None)
        if decided == "adopt" and agentjob is not None:
            await workloads.set_owner(namespace, name, records.owner_reference(agentjob))
            log.info("Adopted batch Job %s/%s for AgentJob %s", namespace, name, owner)
        else:
            await workloads.delete_job(namespace, name, meta["uid"])
            log.warning(
                "Deleted batch Job %s/%s: created for AgentJob %s, which will not run it",
                namespace,
                name,
                owner,
            )


async def settle_due(rt: Runtime) -> None:
    """Look again at the ownerless Jobs whose wait for their AgentJob is over."""
    now = time.monotonic()
    for key in [k for k, due in rt.orphans.items() if due <= now]:
        rt.orphans.pop(key, None)
        job = await workloads.get_job(*key)
        if job is not None and is_orphan(job):
            await settle(rt, job)
