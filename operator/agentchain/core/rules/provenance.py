"""What an AgentJob claims that only the operator may vouch for, and what it is worth.

Anyone allowed to create AgentJobs writes their whole spec and metadata, so nothing
there proves where it came from. Two claims grant something:

- the GitHub **event** (``spec.event``): from it the operator derives a repository of
  an App installation, and so job tokens, the workspace's clone and push, the pull
  request and the chain's comment;
- the **chain position** (the ``chain-id``/``-depth``/``-path``/``parent-job``
  annotations): membership of a chain is access to its workspace and its write-back.

The rest of the spec is the creator's to choose and grants nothing: the prompt, and
``origin`` (which of its agent's triggers' ``next`` the job follows, both written by the
agent's author).

The operator therefore seals each when it writes it, with an HMAC under the operator
key bound to the job's namespace and name, and checks the seal before it derives
anything from it. There are two seals because the two are vouched for apart: the
operator writes the chain position of every job it runs, a hand-made root's included
(it roots a chain of its own), but vouches for an event only when it made the job
from a signed delivery or from a job whose event it vouched for (the webhook's roots,
a chain's children, delegations, a ``/agentchain retry``). This module is the pure
half: the exact bytes each seal covers and what an unsealed claim still counts for.
The key and the MAC live in ``store.sealing``.

An unsealed event is data only (an ordinary run: the prompt may use it, nothing on
GitHub is derived from it); unsealed chain annotations are refused, because reading
them as a fresh root would let a hand-made job reset the limits they carry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from agentchain import models
from agentchain.models.agentjob import JobEvent

POSITION_KEYS = (models.CHAIN_ID, models.CHAIN_DEPTH, models.CHAIN_PATH, models.PARENT_JOB)
UNREADABLE = b"\x00unreadable"
"""Stands for an event that does not parse: no seal made by the operator covers it."""

UNSEALED_POSITION = (
    "its chain annotations were not written by the operator (no valid "
    f"{models.SEAL}): only the operator places a job in a chain. Leave the "
    f"{models.CHAIN_ID} annotations out and the job starts a chain of its own"
)


def canonical_event(event: Mapping[str, Any] | None) -> bytes:
    """The event as the seal covers it: the model's non-default fields, sorted JSON.

    Parsed through the model, so defaults the API server fills in from the CRD
    schema, or fields a later version adds with a default, change nothing.
    """
    if event is None:
        return b""
    try:
        parsed = JobEvent.model_validate(event)
    except ValidationError:
        return UNREADABLE
    data = parsed.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def position_parts(namespace: str, name: str, annotations: Mapping[str, str]) -> tuple[bytes, ...]:
    """What the position seal (``labrats.work/seal``) covers, in a fixed order."""
    return (
        b"position",
        namespace.encode(),
        name.encode(),
        *(annotations.get(key, "").encode() for key in POSITION_KEYS),
    )


def event_parts(namespace: str, name: str, spec: Mapping[str, Any]) -> tuple[bytes, ...]:
    """What the event seal (``labrats.work/event-seal``) covers, in a fixed order."""
    event = spec.get("event")
    canonical = canonical_event(event if isinstance(event, Mapping) else None)
    return (b"event", namespace.encode(), name.encode(), canonical)


def claims_position(annotations: Mapping[str, str]) -> bool:
    """Whether the job claims a place in a chain (any position annotation)."""
    return any(key in annotations for key in POSITION_KEYS)


def trusted_event(event: JobEvent | None, sealed: bool) -> JobEvent | None:
    """The event GitHub access may be derived from: the job's own when the operator
    sealed it, none otherwise (a hand-written event is an ordinary run's data)."""
    return event if sealed else None


def handed_on(event: JobEvent | None, sealed: bool) -> JobEvent | None:
    """The event a job passes on to the jobs it leads to (a chain's child, a delegation,
    a retry), which the operator then seals: the job's own when it was sealed, else the
    same text with nothing GitHub access could be derived from."""
    if event is None or sealed:
        return event
    return event.model_copy(
        update={"source": "manual", "installation_id": None, "subject": None, "head_sha": None}
    )
