"""The batch Jobs and pods the watches show: an informer's cache, read by the hop.

The hop reads an attempt's state (``hop.attempts.observe``) from here, whatever event
brought it there, as a controller-runtime reconciler reads its informers' caches:
:class:`BatchJobs` is fed by the batch Job watch (and by the launch's create answer,
so a pod's first event finds its Job even when it beats the Job's own event),
:class:`Pods` by the pod watch.  The pod watcher selects pods by the AgentJob label,
which anyone who can create a pod can set: a pod's state counts only when its
controller reference carries the uid of the batch Job the operator names for that
AgentJob (``core.rules.ownedby.pod_refusal``, checked by the reader).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from agentchain import models

Obj = dict[str, Any]
_REMEMBERED = 4096


class BatchJobs:
    """The identity (name, uid, labels, owners) and the conditions of recently seen
    batch Jobs, per namespace; a deleted one is dropped."""

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
            },
            "status": {"conditions": list((job.get("status") or {}).get("conditions") or [])},
        }
        self._jobs.move_to_end(key)
        while len(self._jobs) > _REMEMBERED:
            self._jobs.popitem(last=False)

    def get(self, namespace: str, name: str) -> Obj | None:
        return self._jobs.get((namespace, name))

    def gone(self, job: Obj) -> None:
        """The watch says ``job`` was deleted: forgotten, unless another of its name
        (a uid not the deleted one's) took its place meanwhile."""
        meta = job.get("metadata") or {}
        key = (str(meta.get("namespace")), str(meta.get("name")))
        known = self._jobs.get(key)
        if known is not None and known["metadata"].get("uid") == meta.get("uid"):
            del self._jobs[key]


class Pods:
    """The pods of recently seen AgentJobs (by their AgentJob label), as the pod watch
    last showed them (``handlers.podevents.trim_pod``); a deleted pod is dropped."""

    def __init__(self) -> None:
        self._pods: OrderedDict[tuple[str, str], dict[str, Obj]] = OrderedDict()

    @staticmethod
    def _key(pod: Obj) -> tuple[tuple[str, str], str] | None:
        meta = pod.get("metadata") or {}
        owner = (meta.get("labels") or {}).get(models.AGENTJOB_LABEL)
        if not owner:
            return None
        return (str(meta.get("namespace")), str(owner)), str(meta.get("name"))

    def seen(self, pod: Obj) -> None:
        found = self._key(pod)
        if found is None:
            return
        key, name = found
        self._pods.setdefault(key, {})[name] = pod
        self._pods.move_to_end(key)
        while len(self._pods) > _REMEMBERED:
            self._pods.popitem(last=False)

    def gone(self, pod: Obj) -> None:
        found = self._key(pod)
        if found is not None:
            key, name = found
            self._pods.get(key, {}).pop(name, None)

    def of(self, namespace: str, agentjob: str) -> list[Obj]:
        """The pods labelled for ``agentjob``: whose they are is the caller's to check."""
        return list(self._pods.get((namespace, agentjob), {}).values())
