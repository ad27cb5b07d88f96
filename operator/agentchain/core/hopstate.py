"""The values a hop's steps share: the ``Hop`` itself, and what they hand each other.

A step (``capturing``, ``deciding``, ``spawning``, ``launching``, ``closing``) takes a
:class:`Hop` — the runtime, the one AgentJob it acts on and, once decided, that job's
end — plus at most one value another step returned, and returns a value in turn;
only ``hop.hopping`` chains them.  The values live here, below every step, so that
no step imports another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentchain.core import statuswriting
from agentchain.core.rules import provenance
from agentchain.core.runtime import Runtime
from agentchain.models.agentjob import AgentJob, AgentJobStatus, EndPhase, JobEvent
from agentchain.models.conditions import Condition
from agentchain.store import sealing
from agentchain.traces.rules.steps import PodMoments

Obj = dict[str, Any]


@dataclass(frozen=True)
class Hop:
    """One AgentJob the engine is moving along, with the runtime it does it with.

    ``obj`` is the AgentJob as last read or written: every status write made through
    :meth:`patch` updates it in place, so each step sees what the one before wrote.
    """

    rt: Runtime
    obj: Obj
    since: float | None = None
    """When the attempt's end was seen (``time.monotonic``), on a hop that started from
    it: the hop latency metric runs from there to the child's batch Job."""
    ending: AgentJobStatus | None = None
    """The job's end as decided (``hop.capturing.verdict``) and not written yet: ``obj``
    already shows it, so the chain's decision reads the status about to be written,
    and ``hop.closing.close`` writes it in one patch with ``status.next``."""
    output: Output | None = None
    """The ended attempt's output, when the capture just handed it over."""

    def ended(self, end: AgentJobStatus, output: Output | None = None) -> Hop:
        """This hop with its job's end decided (``end``), to be written on its close."""
        status = {**(self.obj.get("status") or {}), **statuswriting.fields(end)}
        obj = {**self.obj, "status": status}
        return dataclasses.replace(self, obj=obj, ending=end, output=output)

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.obj["metadata"].get("uid", ""))

    @property
    def job(self) -> AgentJob:
        return statuswriting.parse(self.obj)

    @property
    def vouched(self) -> bool:
        """Whether the operator vouches for the job's event (its event seal)."""
        return sealing.vouched(self.rt.operator_keys, self.obj)

    @property
    def github_event(self) -> JobEvent | None:
        """The event GitHub access and the workspace may be derived from: the job's
        own under the operator's seal, none for one written by hand."""
        return provenance.trusted_event(self.job.spec.event, self.vouched)

    async def patch(self, status: AgentJobStatus, *conditions: Condition) -> None:
        await self.rt.writes.patch(self.obj, status, *conditions)


@dataclass(frozen=True)
class Exit:
    """How the watches saw an attempt end: its pod's container, or its Job alone."""

    attempt: int
    exit_code: int | None
    pod: str | None
    deadline: bool = False
    lost: str | None = None
    """Why no output can be read (the Job ended with no pod left), when known already."""
    batch_uid: str = ""
    """The batch Job's uid."""
    owner_uid: str = ""
    """The uid of the AgentJob that controls the batch Job: another one of the same
    name (deleted, created again) is not ended by it."""
    stop: dict[str, str | None] | None = None
    """Who stopped the attempt and why, when a stop decided its end."""
    prepare_exit: int | None = None
    """The exit code of a ``workspace-prepare`` that failed: the agent never ran."""
    moments: PodMoments = field(default_factory=PodMoments)
    """Its pod's timestamps (created, scheduled, running, exited), for its span."""


@dataclass(frozen=True)
class Output:
    """A job's captured output, or why it was lost (never an empty string for that)."""

    text: str | None
    lost: str | None = None
    workspace: str | None = None
    """What the job changed in the chain's workspace (``workspaces/rules/stepchanges``), if any."""


@dataclass(frozen=True)
class Ended:
    """A job that ends without running, as its status will say."""

    phase: EndPhase
    reason: str
    message: str
    fields: AgentJobStatus | None = None
    """More status to write with the end (the chain fields of a job never written yet)."""
    conditions: tuple[Condition, ...] = ()
    """Conditions to set with the end besides ``Complete``."""


def typed(fields: Mapping[str, Any]) -> AgentJobStatus:
    """A status patch from fields under their API names (flow control builds its fields
    up as a mapping, approving adds to a job's first status)."""
    return AgentJobStatus.model_validate(dict(fields))
