"""The values a hop's steps share: the ``Hop`` itself, and what they hand each other.

A step (``capturing``, ``deciding``, ``spawning``, ``launching``, ``closing``) takes a
:class:`Hop` — the runtime and the one AgentJob it acts on — plus at most one value
another step returned, and returns a value in turn; only ``engine.hopping`` chains
them.  The values live here, below every step, so that no step imports another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentchain.engine import records
from agentchain.engine.runtime import Runtime
from agentchain.models.agentjob import AgentJob
from agentchain.models.conditions import Condition

Obj = dict[str, Any]


@dataclass(frozen=True)
class Hop:
    """One AgentJob the engine is moving along, with the runtime it does it with.

    ``obj`` is the AgentJob as last read or written: every status write made through
    :meth:`patch` updates it in place, so each step sees what the one before wrote.
    """

    rt: Runtime
    obj: Obj

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
        return records.parse(self.obj)

    async def patch(self, status: Obj, *, condition: Condition | None = None) -> None:
        await self.rt.writes.patch(self.obj, status, condition=condition)


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
    """The batch Job's uid: once the attempt is recorded, its later events are no-ops."""
    owner_uid: str = ""
    """The uid of the AgentJob that controls the batch Job: another one of the same
    name (deleted, created again) is not ended by it."""


@dataclass(frozen=True)
class Output:
    """A job's captured output, or why it was lost (never an empty string for that)."""

    text: str | None
    lost: str | None = None


@dataclass(frozen=True)
class Ended:
    """A job that ends without running, as its status will say."""

    phase: Literal["Failed", "Skipped"]
    reason: str
    message: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    """More status to write with the end (the chain fields of a job never written yet)."""
