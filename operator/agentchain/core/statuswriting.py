"""Small shared helpers: parsing AgentJobs and writing their status.

Everything the engine writes to an AgentJob's status goes through
:meth:`Writes.patch`, which stamps ``observedGeneration`` so users can tell a stale
status apart, and remembers the version each write produced: a watched body at that
version is known to be current as of our own last write (``Unsettled.current``), so it
can stand in for a read.  Until the watch delivers that version, the write's answer
is kept with the version it was made over: while the watch still shows that one, it
knows nothing newer than the answer either, so the answer stands in for a read (one
AgentJob read less when a pod ends before the watch delivered its ``Running``
write).  One :class:`Writes` per ``Runtime``.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from typing import Any

from agentchain import models
from agentchain.core.rules import naming, provenance
from agentchain.hop.rules import chains
from agentchain.kube import resources
from agentchain.models.agentjob import AgentJob, AgentJobStatus
from agentchain.models.conditions import Condition, set_condition
from agentchain.store import sealing
from agentchain.store.signing import OperatorKeys

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


def position(obj: Obj, keys: OperatorKeys) -> chains.ChainPosition:
    """The job's place in its chain: from its annotations, or a new chain rooted here.

    Annotations count only under the operator's seal (``core.rules.provenance``): claimed
    by hand they raise ``ChainMetadataError``, as unreadable ones do, rather than
    being read as a fresh root that would reset the limits they carry.
    """
    meta = obj["metadata"]
    annotations = meta.get("annotations") or {}
    found = chains.position_from_annotations(annotations)
    if provenance.claims_position(annotations) and not sealing.placed(keys, obj):
        raise chains.ChainMetadataError(provenance.UNSEALED_POSITION)
    if found is not None:
        return found
    agent = (obj.get("spec") or {}).get("agentRole", "")
    return chains.root_position(naming.chain_id_for(meta["uid"]), agent)


def chain_fields(obj: Obj, pos: chains.ChainPosition) -> AgentJobStatus:
    """The chain's status fields, written with the job's first status write."""
    return AgentJobStatus(
        chain_id=pos.chain_id,
        chain_depth=pos.depth,
        chain_path=list(pos.path),
        parent_job_id=parent_of(obj),
    )


def fields(status: AgentJobStatus) -> Obj:
    """The merge patch ``status`` makes: the fields set on it, under their API names
    (one set to None is cleared)."""
    return status.model_dump(by_alias=True, exclude_unset=True, mode="json")


def merged(*statuses: AgentJobStatus | None) -> AgentJobStatus:
    """One status patch making all of ``statuses``' (a later one wins a field)."""
    joined = {k: v for status in statuses if status is not None for k, v in fields(status).items()}
    return AgentJobStatus.model_validate(joined)


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
        # The answer of our last write and the version it was made over, until the
        # watch delivers the answer's version (``caught_up``).
        self._answers: dict[tuple[str, str], tuple[str, Obj]] = {}

    def wrote(self, obj: Obj | None, over: str | None = None) -> None:
        """Remember ``obj``, as an AgentJob write of ours answered, as our last write to
        it; ``over``: the resourceVersion of the body the write was made from."""
        meta = (obj or {}).get("metadata") or {}
        uid, version = meta.get("uid"), meta.get("resourceVersion")
        if obj is None or not (uid and version and meta.get("namespace") and meta.get("name")):
            return
        key = (meta["namespace"], meta["name"])
        self._last.pop(key, None)
        self._last[key] = (str(uid), str(version))
        if over:
            self._answers[key] = (over, obj)
        else:
            self._answers.pop(key, None)
        while len(self._last) > self._size:
            gone, _ = self._last.popitem(last=False)
            self._answers.pop(gone, None)

    def last(self, namespace: str, name: str) -> tuple[str, str] | None:
        """(uid, resourceVersion) of this process's last write to the AgentJob, if known."""
        return self._last.get((namespace, name))

    def answer_over(self, namespace: str, name: str, uid: str | None, version: str) -> Obj | None:
        """Our last write's answer, if it was made over ``uid`` at ``version``."""
        key = (namespace, name)
        found, last = self._answers.get(key), self._last.get(key)
        if found is None or last is None or last[0] != uid or found[0] != version:
            return None
        return found[1]

    def answer(self, namespace: str, name: str) -> Obj | None:
        """Our last write's answer, until the watch delivers it: what our own last
        write made the job, which a write by anyone else may have changed since."""
        found = self._answers.get((namespace, name))
        return found[1] if found is not None else None

    def caught_up(self, namespace: str, name: str) -> None:
        """The watch delivered our last write: its answer is no longer needed."""
        self._answers.pop((namespace, name), None)

    def forget(self, namespace: str, name: str) -> None:
        self._last.pop((namespace, name), None)
        self._answers.pop((namespace, name), None)

    async def patch(
        self, obj: Obj, status: AgentJobStatus, *conditions: Condition, at_version: bool = False
    ) -> Obj | None:
        """Merge ``status`` (and ``conditions``, each replacing the one of its type)
        into ``obj``'s status; ``obj`` follows the answer.  ``at_version``: only if the
        job is still at ``obj``'s resourceVersion, else ``errors.Conflict`` (for a
        write made without the job's lock)."""
        namespace, name = name_of(obj)
        body = {**fields(status), "observedGeneration": obj["metadata"].get("generation")}
        if conditions:
            current = parse(obj).status.conditions
            for condition in conditions:
                current = set_condition(current, condition, now())
            body["conditions"] = [c.to_api() for c in current]
        over = obj["metadata"].get("resourceVersion")
        if at_version:
            patched = await resources.patch_status_at(
                namespace, resources.AGENTJOBS, name, over, body
            )
        else:
            patched = await resources.patch_status(namespace, resources.AGENTJOBS, name, body)
        if patched is not None:
            obj["status"] = patched.get("status", {})
            version = (patched.get("metadata") or {}).get("resourceVersion")
            # A new dict: ``obj`` may share its metadata with a watched body.
            obj["metadata"] = {**obj["metadata"], "resourceVersion": version}
            self.wrote(patched, str(over) if over else None)
        return patched
