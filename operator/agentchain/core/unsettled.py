"""AgentJobs the engine still has work on, as the operator's own watch shows them.

The periodic resync (``resync.keep_resyncing``) walks this index instead of
asking kopf for a timer per object: a kopf timer needs a finalizer on every
AgentJob, which cost two extra writes per job (adding and removing it), delayed
the first handler call by one round trip, and blocked deleting an AgentJob while
the operator was down.  The index is fed by the operator's own AgentJob watch
(``handlers.watches``), so it costs no API calls; the watch lists again after a
410 and hands over what that list no longer holds as deleted, so nothing stays
missing from it or stale in it.

It also knows which jobs are settled (their names only): a restart lists every
pod and batch Job of every finished job, and an event for a settled job is
dropped before any I/O (each cost ~4 requests).  :class:`Backlog` says
whether the restart's initial lists have been worked through (``/readyz``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from agentchain.core import statuswriting
from agentchain.core.rules.outcomes import is_settled
from agentchain.models.conditions import Reason

Obj = dict[str, Any]
Key = tuple[str, str]


def needs_resync(obj: Obj) -> bool:
    """Whether the engine may still have something to do for this job."""
    try:
        parsed = statuswriting.parse(
            {"status": obj.get("status") or {}, "spec": {"agentRole": "x"}}
        )
    except ValueError:
        return True  # An unreadable status is looked at again, not forgotten.
    return not is_settled(parsed.status)


@dataclass
class _Entry:
    obj: Obj
    due: float
    # The batch Job as the Job watch last showed it: (name, ended); None when not seen
    # (or deleted) since this entry was made.
    job: tuple[str, bool] | None = None


@dataclass
class Backlog:
    """The restart's initial lists and the work they brought, as ``/readyz`` shows it.

    ``listed``: every watch has handed over its first list; ``pending``: how many
    objects still have handler work queued or running; done once both are behind us
    (and stays done: later bursts are ordinary work, not the restart's backlog).
    """

    listed: bool = False
    pending: int = 0
    done: bool = False

    def update(self, pending: int) -> None:
        self.pending = pending
        if self.listed and pending == 0:
            self.done = True

    def state(self) -> str:
        if self.done:
            return "done"
        return "working" if self.listed else "listing"


class Unsettled:
    """Latest body of each unsettled AgentJob and when it is next due for a resync;
    the names of the settled ones."""

    def __init__(self, writes: statuswriting.Writes | None = None) -> None:
        self._jobs: dict[Key, _Entry] = {}
        self._settled: set[Key] = set()
        self.backlog = Backlog()
        self._writes = writes if writes is not None else statuswriting.Writes()

    def __len__(self) -> int:
        return len(self._jobs)

    def reset(self) -> None:
        """Forget everything before the watches list again from scratch (a replica that
        leads again after a pause missed deletions no relist of its own would show)."""
        self._jobs.clear()
        self._settled.clear()
        self.backlog = Backlog()

    def observe(self, obj: Obj, now: float, interval: float) -> tuple[str, str] | None:
        """A watch event: keep the newest body; a job first seen is due ``interval`` later.

        Returns (phase before, phase now) when an indexed job's phase changed: the one
        log line per transition (a job first seen has no transition to tell).
        """
        key = statuswriting.name_of(obj)
        entry = self._jobs.get(key)
        same = entry is not None and _uid(entry.obj) == _uid(obj)
        before = _phase(entry.obj) if entry is not None and same else None
        if not needs_resync(obj):
            self._jobs.pop(key, None)
            self._settled.add(key)
            self._writes.forget(*key)
        else:
            self._settled.discard(key)
            if entry is None or not same:
                self._jobs[key] = _Entry(obj, now + interval)
            else:
                entry.obj = obj
            if (_uid(obj), _version(obj)) == self._writes.last(*key):
                self._writes.caught_up(*key)
        after = _phase(obj)
        return (before, after) if before is not None and before != after else None

    def forget(self, obj: Obj) -> None:
        """The job was deleted: forget it, and our writes to it (a settled job has no
        entry, but an answer to its last write may be left)."""
        key = statuswriting.name_of(obj)
        self._settled.discard(key)
        entry = self._jobs.get(key)
        if entry is not None and _uid(entry.obj) == _uid(obj):
            del self._jobs[key]
        written = self._writes.last(*key)
        if written is not None and written[0] == _uid(obj):
            self._writes.forget(*key)

    def is_settled(self, namespace: str, name: str) -> bool:
        """Whether the watch last showed ``name`` settled: its pods' and Jobs' events
        have nothing left to do (a job re-created under that name shows up unsettled
        first, or, should its pod's event win the race, is the resync's)."""
        return (namespace, name) in self._settled

    def running_in(self, namespace: str, name: str, pod: str) -> bool:
        """Whether the watched job already says it runs in ``pod``: that pod's
        Running events have nothing to record."""
        entry = self._jobs.get((namespace, name))
        status = (entry.obj.get("status") or {}) if entry is not None else {}
        return status.get("phase") == "Running" and status.get("podName") == pod

    def job_watched(self, namespace: str, name: str, job: str, *, ended: bool) -> None:
        """The Job watch showed batch Job ``job`` of AgentJob ``name``, ended or not."""
        entry = self._jobs.get((namespace, name))
        if entry is not None:
            entry.job = (job, ended)

    def job_gone(self, namespace: str, name: str, job: str) -> None:
        entry = self._jobs.get((namespace, name))
        if entry is not None and entry.job is not None and entry.job[0] == job:
            entry.job = None

    def quiet(self, obj: Obj) -> bool:
        """Whether the watches show ``obj`` running with its batch Job not ended: then a
        resync has nothing to catch up on.  Its pod's end reaches the engine as a pod
        event, else as the Job's final condition (an event whose handler fails leaves
        the Job ended, so not quiet, and the resync reads); a Job deleted or never seen
        since the index learnt of the job is not quiet either."""
        entry = self._jobs.get(statuswriting.name_of(obj))
        if entry is None or entry.job is None or _uid(entry.obj) != _uid(obj):
            return False
        status = entry.obj.get("status") or {}
        name, ended = entry.job
        return status.get("phase") == "Running" and status.get("jobName") == name and not ended

    def current(self, namespace: str, name: str) -> Obj | None:
        """A copy of the job as of this process's last write to it, when the watch
        knows nothing newer; else None, and the caller reads it.

        Only the engine writes an AgentJob's status, so the body the watch delivered
        for our own last write is what a read would answer, bar a write by someone
        else that the watch has not delivered yet, which a read a moment earlier
        would miss just the same.  While the watch still shows the version our last
        write was made over (it lags), that write's answer stands in the same way: the
        watch has delivered nothing after it.  A body of any other version (someone
        else wrote) or of another object of the same name is not used.
        """
        entry = self._jobs.get((namespace, name))
        written = self._writes.last(namespace, name)
        if entry is None or written is None:
            return None
        uid, version = _uid(entry.obj), _version(entry.obj)
        if (uid, version) == written:
            return copy.deepcopy(entry.obj)  # Patches update the caller's copy in place.
        answer = self._writes.answer_over(namespace, name, uid, version)
        return copy.deepcopy(answer) if answer is not None else None

    def watched(self, namespace: str, name: str) -> Obj | None:
        """A copy of the job's newest body the watch delivered, if it is unsettled."""
        entry = self._jobs.get((namespace, name))
        return copy.deepcopy(entry.obj) if entry is not None else None

    def waiting_on(self, namespace: str, name: str) -> list[Obj]:
        """Waiting jobs of ``namespace`` whose ``dependsOn`` names ``name``."""
        found = []
        for (ns, _), entry in self._jobs.items():
            obj = entry.obj
            if ns != namespace or (obj.get("status") or {}).get("phase") != "Waiting":
                continue
            if name in ((obj.get("spec") or {}).get("dependsOn") or []):
                found.append(obj)
        return found

    def waiting_for_agent(self, namespace: str) -> list[Obj]:
        """Unlaunched jobs of ``namespace`` that wait for their AiAgent, or that the
        engine has not written to yet (one may be deciding to wait right now: its
        start, after the lock, finds the agent that made the caller look)."""
        found = []
        for (ns, _), entry in self._jobs.items():
            status = entry.obj.get("status") or {}
            if ns != namespace or status.get("jobName"):
                continue
            if status.get("reason") in (None, Reason.WAITING_FOR_AGENT):
                found.append(entry.obj)
        return found

    def take_due(self, now: float, interval: float) -> list[Obj]:
        """Jobs due by ``now``; each is due again ``interval`` later unless it settles."""
        due = []
        for entry in self._jobs.values():
            if entry.due <= now:
                due.append(entry.obj)
                entry.due = now + interval
        return due


def _phase(obj: Obj) -> str:
    return str((obj.get("status") or {}).get("phase") or "New")


def _version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion"))


def _uid(obj: Obj) -> str | None:
    uid = (obj.get("metadata") or {}).get("uid")
    return str(uid) if uid is not None else None
