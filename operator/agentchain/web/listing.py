"""Reading AgentJobs and AiAgents for the web layer, across the namespaces it serves.

The API server lists custom resources in name order, not creation order, and its
``continue`` tokens cannot resume a differently-ordered view, so the job API
reads every matching object (narrowed server-side by label selectors, fetched in
pages of :data:`PAGE`) and orders and pages them itself (see ``api.py``).  The
webhook matches against a short-lived in-memory AiAgent listing
(:class:`SharedAgentListing`), never one API list per delivery.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentchain import models
from agentchain.core.rules import naming
from agentchain.github.rules.matching import AgentCandidate
from agentchain.kube import resources
from agentchain.models.aiagent import AiAgent

Obj = dict[str, Any]
PAGE = 500
# How long the webhook matches against one AiAgent listing: short enough that a new agent
# is seen within seconds, long enough that a burst of deliveries lists once, not per delivery.
AGENTS_MAX_AGE_SECONDS = 2.0


def job_selector(chain_id: str | None, agent_role: str | None) -> str | None:
    """The label selector for AgentJobs of ``chain_id`` and ``agent_role`` ("" for all),
    or None when no AgentJob can match (a value that is no label value has no label)."""
    terms: list[str] = []
    if chain_id is not None:
        if not chain_id or not naming.is_label_value(chain_id):
            return None  # Chain ids are label values as made (chains.position_labels).
        terms.append(f"{models.CHAIN_ID}={chain_id}")
    if agent_role is not None:
        if not agent_role:
            return None
        # As labelled; a role that is no label value is labelled by a digest of it, and the
        # caller still compares spec.agentRole itself.
        terms.append(f"{models.AGENT_ROLE}={naming.label_value(agent_role)}")
    return ",".join(terms)


async def list_all(
    namespace: str | None, plural: str, selector: str | None = None, fields: str | None = None
) -> list[Obj]:
    items: list[Obj] = []
    token: str | None = None
    while True:
        page, token = await resources.list_objects(
            namespace,
            plural,
            label_selector=selector,
            field_selector=fields,
            limit=PAGE,
            continue_token=token,
        )
        items.extend(page)
        if not token:
            return items


async def list_in(
    namespaces: Sequence[str],
    plural: str,
    selector: str | None = None,
    *,
    fields: str | None = None,
) -> list[Obj]:
    """Objects in ``namespaces`` (empty: cluster-wide), narrowed by the API server."""
    if not namespaces:
        return await list_all(None, plural, selector, fields)
    pages = await asyncio.gather(*(list_all(ns, plural, selector, fields) for ns in namespaces))
    return [obj for page in pages for obj in page]


async def agents_by_namespace(namespaces: Sequence[str]) -> dict[str, list[AgentCandidate]]:
    """Every parseable AiAgent, grouped by namespace (an unparseable one is skipped)."""
    grouped: dict[str, list[AgentCandidate]] = {}
    for obj in await list_in(namespaces, resources.AIAGENTS):
        meta = obj.get("metadata", {})
        try:
            agent = AiAgent.model_validate(obj)
        except ValueError:
            continue  # The CRD schema makes this unreachable; its status reports it anyway.
        grouped.setdefault(meta["namespace"], []).append(AgentCandidate(meta["name"], agent.spec))
    return grouped


@dataclass
class SharedAgentListing:
    """AiAgents for the webhook: one listing reused for :data:`AGENTS_MAX_AGE_SECONDS`.

    A burst of deliveries would otherwise list every AiAgent once per delivery, and
    the listing (an API round trip plus parsing every agent) would dominate the
    webhook's answer time.  A listing younger than ``max_age`` (measured from when it
    started) is served from memory; an older one is refreshed by the first caller,
    and callers arriving meanwhile share that one in-flight listing.  So an agent
    created or changed less than ``max_age`` ago may not be seen yet: a delivery
    in that window matches the agents as they were.  The shared task is shielded so
    a client that disconnects does not cancel it for the others.  Callers must not
    mutate the answer: it is shared.
    """

    namespaces: tuple[str, ...]
    max_age: float = AGENTS_MAX_AGE_SECONDS
    _inflight: asyncio.Task[dict[str, list[AgentCandidate]]] | None = field(default=None)
    _cached: tuple[float, dict[str, list[AgentCandidate]]] | None = field(default=None)

    async def get(self) -> dict[str, list[AgentCandidate]]:
        cached = self._cached
        if cached is not None and time.monotonic() - cached[0] < self.max_age:
            return cached[1]
        task = self._inflight
        if task is None:
            task = asyncio.ensure_future(self._refresh())
            self._inflight = task
            task.add_done_callback(self._finished)
        return await asyncio.shield(task)

    async def _refresh(self) -> dict[str, list[AgentCandidate]]:
        started = time.monotonic()
        grouped = await agents_by_namespace(self.namespaces)
        self._cached = (started, grouped)
        return grouped

    def _finished(self, task: asyncio.Task[dict[str, list[AgentCandidate]]]) -> None:
        if self._inflight is task:
            self._inflight = None
        if not task.cancelled():
            task.exception()  # Retrieved here so a listing nobody awaits is not reported.
