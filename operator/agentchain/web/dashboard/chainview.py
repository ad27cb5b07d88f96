"""A chain laid out as a tree for the dashboard: nodes, edges, endings and totals.

Pure: a function of the chain's AgentJobs (as read from the API server) and its
Redis record, so it is tested without either (``tests/unit/web/dashboard/test_chainview.py``)
and the page only draws what it is given.

* **Nodes** are the chain's jobs, oldest first, each with its display state: the
  phase, or ``refused`` for a job recorded only to carry a refusal (loop, depth,
  missing agent: the operator marks it with a disposition annotation), with the
  reason and message, the depth, exit code and duration.
* **Edges** come from each parent's ``status.next`` (what the chain did: spawned,
  skipped, refused, with the recorded reason and message).  An edge's ``condition``
  is the one the parent's step recorded in its message when it was not met, else the
  ``condition``/``failurePolicy`` of the trigger that started the parent as its
  AiAgent says *now* (``agents``; the job records what happened, not the condition).
* **Endings** are the ``next`` entries that created no job (the chain stopped, or
  had nothing more to run), attached to the job they ended at.
* **Deleted jobs**: when AgentJobs are gone but the chain's record (its hops) is
  still in Redis, each hop's job becomes a node marked ``deleted`` with the agent
  and phase the hop recorded, and spawned/skipped/refused hops become edges, so the
  chain still draws.

``rows`` is the drawing order: depth-first from each root, each row with its level
in the tree; a job whose parent is unknown is a root rather than hidden.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from typing import Any

from agentchain import models
from agentchain.core.rules import outcomes
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import AiAgentSpec
from agentchain.store.chainrecords import ChainRecord
from agentchain.web import serializers

Obj = dict[str, Any]
DISPOSITION = models.DISPOSITION
CHILD_ACTIONS = frozenset({"spawned", "skipped", "refused"})
_UNMET = re.compile(r"^Condition ([a-z-]{1,20}) not met")


def parse_time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def duration(started: str | None, ended: str | None) -> float | None:
    begin, end = parse_time(started), parse_time(ended)
    return (end - begin).total_seconds() if begin and end else None


def display_state(obj: Obj) -> str:
    """What a node shows as its state: the phase lower-cased, or ``refused``."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if str(annotations.get(DISPOSITION, "")).startswith("refused"):
        return "refused"
    phase = (obj.get("status") or {}).get("phase") or "Pending"
    return str(phase).lower()


def node_of(obj: Obj, currency: str | None = None) -> Obj:
    view = serializers.job_view(obj, currency)
    return {
        "id": view["id"],
        "namespace": view["namespace"],
        "agent": view["agentRole"],
        "phase": view["phase"],
        "state": display_state(obj),
        "reason": view["reason"],
        "message": view["message"],
        "depth": view["chainDepth"],
        "parent": view["parentJobId"],
        "exitCode": view["exitCode"],
        "createdAt": view["createdAt"],
        "startedAt": view["startedAt"],
        "completedAt": view["completedAt"],
        "durationSeconds": duration(view["startedAt"], view["completedAt"]),
        "deleted": False,
        "endings": [],
        "usage": view["usage"],
    }


def configured_step(obj: Obj, agents: Mapping[str, AiAgentSpec]) -> str | None:
    """``condition/failurePolicy`` of the step that follows ``obj``, as configured now."""
    spec = obj.get("spec") or {}
    agent = agents.get(str(spec.get("agentRole") or ""))
    if agent is None:
        return None
    try:
        event = JobEvent.model_validate(spec["event"]) if spec.get("event") else None
    except ValueError:
        event = None
    step = outcomes.trigger_step(agent, str(spec.get("origin") or "manual"), event)
    return f"{step.condition}, {step.failure_policy}" if step is not None else None


def edge_of(parent: str, entry: Obj, configured: str | None = None) -> Obj:
    message = str(entry.get("message") or "")
    unmet = _UNMET.match(message)
    return {
        "from": parent,
        "to": entry.get("child"),
        "action": entry.get("action"),
        "agent": entry.get("agent"),
        "reason": entry.get("reason"),
        "message": message or None,
        "condition": f"{unmet.group(1)} not met" if unmet else configured,
    }


def _from_hops(
    namespace: str, nodes: dict[str, Obj], edges: dict[str, Obj], hops: Iterable[Obj]
) -> None:
    """Nodes and edges for jobs known only from the chain's record (deleted since)."""
    for hop in hops:
        name = str(hop.get("jobName") or "")
        if not name:
            continue
        if name not in nodes or (nodes[name]["deleted"] and nodes[name]["phase"] is None):
            # Unknown, or only named so far as a child: its own hop says what it was.
            nodes[name] = _stub(namespace, name, hop)
        child = str(hop.get("detail") or "")
        if hop.get("decision") in CHILD_ACTIONS and child and child not in edges:
            edges[child] = edge_of(name, {"action": hop.get("decision"), "child": child})
            nodes.setdefault(child, _stub(namespace, child, {}))


def _stub(namespace: str, name: str, hop: Obj) -> Obj:
    phase = hop.get("phase") or None
    return {
        "id": name,
        "namespace": namespace,
        "agent": hop.get("agent"),
        "phase": phase,
        "state": str(phase or "unknown").lower(),
        "deleted": True,
        "endings": [],
        **dict.fromkeys(("reason", "message", "depth", "parent", "exitCode"), None),
        **dict.fromkeys(("createdAt", "startedAt", "completedAt", "durationSeconds"), None),
    }


def _rows(nodes: dict[str, Obj], parents: dict[str, str]) -> list[Obj]:
    children: dict[str, list[str]] = {}
    roots: list[str] = []
    for name in nodes:
        parent = parents.get(name)
        if parent in nodes and parent != name:
            children.setdefault(parent, []).append(name)
        else:
            roots.append(name)
    rows: list[Obj] = []
    seen: set[str] = set()
    stack = [(name, 0) for name in reversed(roots)]
    while stack:  # Iterative: a malformed record cannot recurse without bound.
        name, level = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        rows.append({"id": name, "level": level})
        stack.extend((c, level + 1) for c in reversed(children.get(name, [])))
    return rows


def _totals(nodes: Iterable[Obj], currency: str) -> Obj:
    listed = list(nodes)
    by_state: dict[str, int] = {}
    for node in listed:
        by_state[node["state"]] = by_state.get(node["state"], 0) + 1
    starts = [n["startedAt"] or n["createdAt"] for n in listed if n["startedAt"] or n["createdAt"]]
    ends = [n["completedAt"] for n in listed if n["completedAt"]]
    return {
        "jobs": len(listed),
        "byState": by_state,
        "startedAt": min(starts) if starts else None,
        "endedAt": max(ends) if ends else None,
        "runSeconds": sum(n["durationSeconds"] or 0 for n in listed),
        "usage": serializers.usage_total((n.get("usage") for n in listed), currency),
    }


def layout(
    chain_id: str,
    namespace: str,
    jobs: Iterable[Obj],
    record: ChainRecord | None,
    agents: Mapping[str, AiAgentSpec] | None = None,
) -> Obj:
    """The chain as the dashboard draws it (see the module docstring); ``agents`` by
    triggerName, for the conditions on edges."""
    # Creation times have one-second resolution: a parent and its child often tie; depth not.
    objs = sorted(jobs, key=lambda o: (_depth(o), serializers.sort_key(o)))
    currency = serializers.chain_currency(objs, agents or {})
    nodes: dict[str, Obj] = {}
    edges: dict[str, Obj] = {}
    for obj in objs:
        node = node_of(obj, currency)
        nodes[node["id"]] = node
        configured = configured_step(obj, agents or {})
        for entry in (obj.get("status") or {}).get("next") or []:
            if entry.get("action") in CHILD_ACTIONS and entry.get("child"):
                edges[str(entry["child"])] = edge_of(node["id"], entry, configured)
            else:
                node["endings"].append(edge_of(node["id"], entry))
    _from_hops(namespace, nodes, edges, record.hops if record else [])
    parents = {n: e["from"] for n, e in edges.items()}
    parents.update({n: v["parent"] for n, v in nodes.items() if v["parent"]})
    for name, node in nodes.items():
        node["parent"] = parents.get(name)
    return {
        "chainId": chain_id,
        "namespace": namespace,
        "complete": record.complete if record else False,
        "outcome": record.outcome if record else None,
        "lastJob": record.last_job if record else None,
        "completedAt": record.completed_at if record else None,
        "nodes": nodes,
        "edges": list(edges.values()),
        "rows": _rows(nodes, parents),
        "totals": _totals(nodes.values(), currency),
    }


def _depth(obj: Obj) -> int:
    depth = serializers.job_view(obj)["chainDepth"]
    return depth if isinstance(depth, int) else 0


def _round_of(obj: Obj, vouched: bool) -> tuple[str, int] | None:
    """The chain a root job's round continues and its number, from its event when the
    operator vouches for it (a label or a hand-written event is anyone's)."""
    event = (obj.get("spec") or {}).get("event") or {}
    continues, number = event.get("continues"), event.get("round")
    if not vouched or not isinstance(continues, str) or not continues:
        return None
    return continues, number if isinstance(number, int) else 0


def lineage(
    chain_id: str, roots: Iterable[tuple[Obj, bool]], rounds: Iterable[tuple[Obj, bool]]
) -> Obj:
    """What the chain page says of follow-up rounds (``roots``: the chain's root jobs,
    ``rounds``: the root jobs labelled as continuing it; each with whether the operator
    vouches for its event): ``continues`` (this chain is a round: of which chain, which
    round) and ``rounds`` (the rounds that continue this chain, in order)."""
    continues = None
    for obj, vouched in roots:
        found = _round_of(obj, vouched)
        if found is not None and found[0] != chain_id:
            continues = {"chainId": found[0], "round": found[1]}
    listed: list[Obj] = []
    for obj, vouched in rounds:
        found = _round_of(obj, vouched)
        round_chain = ((obj.get("metadata") or {}).get("labels") or {}).get(models.CHAIN_ID)
        if found is None or found[0] != chain_id or not round_chain:
            continue
        state = display_state(obj)
        listed.append({"chainId": round_chain, "round": found[1], "state": state})
    listed.sort(key=lambda r: (r["round"], r["chainId"]))
    return {"continues": continues, "rounds": listed}
