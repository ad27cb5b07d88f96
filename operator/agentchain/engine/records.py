"""Small shared helpers: parsing AgentJobs and writing their status.

Everything the engine writes to an AgentJob's status goes through
:meth:`Writes.patch`, which stamps ``observedGeneration`` so users can tell a stale
status apart, and remembers the version each write produced: a watched body at that
version is known to be current as of our own last write (``Unsettled.current``), so it
can stand in for a read.  One :class:`Writes` per ``Runtime``.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from typing import Any

from agentchain import models
from agentchain.kube import resources
from agentchain.models.agentjob import AgentJob
from agentchain.models.conditions import Condition, set_condition
from agentchain.policy import chains, naming

Obj = dict[str, Any]
DISPOSITION = models.DISPOSITION
DISPOSITION_MESSAGE = models.DISPOSITION_MESSAGE
WRITES_REMEMBERED = 10_000


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def name_of(obj: Obj) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta["namespace"], meta["name"]


def parse(obj: Obj) -> AgentJob:
    return AgentJob.model_validate(
        {"spec": obj.get("spec") or {}, "status": obj.get("status") or {}}
    )


def position(obj: Obj) -> chains.ChainPosition:
    """The job's place in its chain: from its annotations, or a new chain rooted here."""
    meta = obj["metadata"]
    found = chains.position_from_annotations(meta.get("annotations") or {})
    if found is not None:
        return found
    agent = (obj.get("spec") or {}).get("agentRole", "")
    return chains.root_position(naming.chain_id_for(meta["uid"]), agent)


def chain_fields(obj: Obj, pos: chains.ChainPosition) -> Obj:
    """The chain's status fields, written with the job's first status write."""
    return {
        "chainId": pos.chain_id,
        "chainDepth": pos.depth,
        "chainPath": list(pos.path),
        "parentJobId": parent_of(obj),
    }


def owner_reference(obj: Obj) -> Obj:
    return {
        "apiVersion": models.API_VERSION,
        "kind": obj.get("kind", "AgentJob"),
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def parent_of(obj: Obj) -> str | None:
    return (obj["metadata"].get("annotations") or {}).get(models.PARENT_JOB)


class Writes:
    """AgentJob status writes, and (uid, resourceVersion) of this process's last one to
    each AgentJob, the oldest forgotten past ``size``."""

    def __init__(self, size: int = WRITES_REMEMBERED) -> None:
        self._size = size
        self._last: OrderedDict[tuple[str, str], tuple[str, str]] = OrderedDict()

    def wrote(self, obj: Obj | None) -> None:
        """Remember ``obj``, as an AgentJob write of ours answered, as our last write to it."""
        meta = (obj or {}).get("metadata") or {}
        uid, version = meta.get("uid"), meta.get("resourceVersion")
        if not (uid and version and meta.get("namespace") and meta.get("name")):
            return
        key = (meta["namespace"], meta["name"])
        self._last.pop(key, None)
        self._last[key] = (str(uid), str(version))
        while len(self._last) > self._size:
            self._last.popitem(last=False)

    def last(self, namespace: str, name: str) -> tuple[str, str] | None:
        """(uid, resourceVersion) of this process's last write to the AgentJob, if known."""
        return self._last.get((namespace, name))

    def forget(self, namespace: str, name: str) -> None:
        self._last.pop((namespace, name), None)

    async def patch(
        self, obj: Obj, status: Obj, *, condition: Condition | None = None
    ) -> Obj | None:
        """Merge ``status`` into ``obj``'s status (``obj`` follows the answer)."""
        namespace, name = name_of(obj)
        status = {**status, "observedGeneration": obj["metadata"].get("generation")}
        if condition is not None:
            current = parse(obj).status.conditions
            merged = set_condition(current, condition, now())
            status["conditions"] = [c.to_api() for c in merged]
        patched = await resources.patch_status(namespace, resources.AGENTJOBS, name, status)
        if patched is not None:
            obj["status"] = patched.get("status", {})
            self.wrote(patched)
        return patched


class Recent:
    """A set that forgets its oldest members past ``size``: a process-wide memo."""

    def __init__(self, size: int = WRITES_REMEMBERED) -> None:
        self._size = size
        self._members: OrderedDict[tuple[str, ...], None] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._members

    def add(self, key: tuple[str, ...]) -> None:
        self._members[key] = None
        self._members.move_to_end(key)
        while len(self._members) > self._size:
            self._members.popitem(last=False)
