"""Which pods may finish an AgentJob: the operator's own, checked by owner uid.

The pod watcher selects pods by the AgentJob label, which anyone who can create a
pod can set.  Before a pod's state counts, the batch Job its controller reference
names is looked up and checked (``core.rules.ownedby.pod_refusal``).  Jobs come from
:class:`BatchJobs`, fed by the batch Job watch the operator already holds, so the
check costs no API call on a hop; only a Job the watch has not shown yet (or a
reference whose uid the index does not know) is read.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

from agentchain.core.rules import ownedby
from agentchain.kube import workloads

log = logging.getLogger(__name__)
Obj = dict[str, Any]
_REMEMBERED = 4096


class BatchJobs:
    """The identity (name, uid, labels, owners) of recently seen batch Jobs, per namespace."""

    def __init__(self) -> None:
        self._jobs: OrderedDict[tuple[str, str], Obj] = OrderedDict()

    def seen(self, job: Obj) -> None:
        meta = job.get("metadata") or {}
        key = (str(meta.get("namespace")), str(meta.get("name")))
        self._jobs[key] = {
            "metadata": {
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "labels": dict(meta.get("labels") or {}),
                "ownerReferences": list(meta.get("ownerReferences") or []),
            }
        }
        self._jobs.move_to_end(key)
        while len(self._jobs) > _REMEMBERED:
            self._jobs.popitem(last=False)

    def get(self, namespace: str, name: str) -> Obj | None:
        return self._jobs.get((namespace, name))


async def controlling_job(jobs: BatchJobs, pod: Obj, agentjob: str) -> Obj | None:
    """The operator's batch Job that controls ``pod`` for ``agentjob``; None (logged) if
    the pod is not one of the operator's, whatever its labels say."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace"))
    ref = ownedby.controller_job(pod)
    job = None
    if ref is not None:
        job = jobs.get(namespace, ref.name)
        if job is None or (job.get("metadata") or {}).get("uid") != ref.uid:
            job = await workloads.get_job(namespace, ref.name)
            if job is not None:
                jobs.seen(job)
    refusal = ownedby.pod_refusal(pod, job, agentjob)
    if refusal is not None:
        log.warning(
            "Pod %s/%s is labelled for AgentJob %s but %s: its state is ignored",
            namespace,
            meta.get("name"),
            agentjob,
            refusal,
        )
        return None
    return job
