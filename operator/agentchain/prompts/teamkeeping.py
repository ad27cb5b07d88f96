"""Keeping each chain's team anchor (SPEC §6, seed 004) as the engine moves it along.

The anchor is what the operator knows of the whole team: jobs and their phases,
hand-offs, escalations and decisions, composed by the pure ``prompts.rules.teamanchor``
and written atomically by ``AnchorStore``.  It is a record for people and agents,
not a source of truth the engine reads back, so a failed write is logged and the
chain goes on; the next transition writes the whole picture again.
"""

from __future__ import annotations

import logging
from typing import Any

from agentchain.core import statuswriting
from agentchain.core.runtime import Runtime
from agentchain.hop.rules import chains
from agentchain.memory.anchors import TEAM_ANCHOR_MAX_BYTES, TeamAnchorMutation
from agentchain.prompts.rules import teamanchor
from agentchain.store.storeerrors import StoreError

log = logging.getLogger(__name__)
Obj = dict[str, Any]


def _position(rt: Runtime, obj: Obj) -> chains.ChainPosition | None:
    try:
        return statuswriting.position(obj, rt.operator_keys)
    except chains.ChainMetadataError:
        return None  # No chain to keep an anchor for; the job's status says why.


async def job(rt: Runtime, obj: Obj) -> None:
    """The job's current phase, from the status the engine just wrote."""
    pos = _position(rt, obj)
    if pos is None:
        return
    namespace, name = statuswriting.name_of(obj)
    status = statuswriting.parse(obj).status

    def mutate(anchor: dict[str, Any]) -> dict[str, Any]:
        return teamanchor.job_update(
            anchor,
            chain_id=pos.chain_id,
            job=name,
            agent=str(obj["spec"]["agentRole"]),
            depth=pos.depth,
            phase=status.phase or "Pending",
            reason=status.reason,
            attempt=status.attempt,
            at=statuswriting.now().isoformat(),
            limit=TEAM_ANCHOR_MAX_BYTES,
        )

    await _update(rt, namespace, pos.chain_id, mutate)


async def hop(rt: Runtime, obj: Obj, entry: Obj) -> None:
    """What the chain did after ``obj``: a ``status.next`` entry."""
    pos = _position(rt, obj)
    if pos is None:
        return
    namespace, name = statuswriting.name_of(obj)

    def mutate(anchor: dict[str, Any]) -> dict[str, Any]:
        return teamanchor.hop_update(
            anchor,
            chain_id=pos.chain_id,
            parent=name,
            parent_agent=str(obj["spec"]["agentRole"]),
            action=str(entry["action"]),
            child=entry.get("child"),
            child_agent=entry.get("agent"),
            reason=str(entry.get("reason") or ""),
            message=str(entry.get("message") or ""),
            at=statuswriting.now().isoformat(),
            limit=TEAM_ANCHOR_MAX_BYTES,
        )

    await _update(rt, namespace, pos.chain_id, mutate)


async def complete(rt: Runtime, obj: Obj, outcome: str) -> None:
    pos = _position(rt, obj)
    if pos is None:
        return
    namespace, name = statuswriting.name_of(obj)

    def mutate(anchor: dict[str, Any]) -> dict[str, Any]:
        return teamanchor.complete_update(
            anchor,
            chain_id=pos.chain_id,
            outcome=outcome,
            last_job=name,
            at=statuswriting.now().isoformat(),
            limit=TEAM_ANCHOR_MAX_BYTES,
        )

    await _update(rt, namespace, pos.chain_id, mutate)


async def _update(rt: Runtime, namespace: str, chain_id: str, mutate: TeamAnchorMutation) -> None:
    try:
        await rt.anchors.update_team_anchor(namespace, chain_id, mutate)
    except (StoreError, ValueError) as exc:
        log.warning("team anchor of chain %s/%s not updated: %s", namespace, chain_id, exc)
