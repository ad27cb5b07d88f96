"""AgentJobs as the job API shows them: seed 003's fields, and chains as trees.

The API's vocabulary is seed 003's (``status: completed``), the operator's is
Kubernetes' (``phase: Succeeded``); both are returned so a client written for
the seed works unchanged and nothing the operator knows is hidden.  Chain
metadata is read from the annotations first, because they are written at
creation and survive a lost status, then from the status.

Pure functions of the objects read from the API server, so the API handlers
and the dashboard render exactly the same view.  The one thing a job does not
record about itself is the currency its usage counts in (its chain's first
agent's budget): callers that read the AiAgents pass it (``chain_currency``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from agentchain import models
from agentchain.models.aiagent import AiAgentSpec
from agentchain.store.chainrecords import ChainRecord

Obj = dict[str, Any]
DEFAULT_CURRENCY = "USD"  # As the usage route reports a chain without a budget.

# Seed 003's status values, by AgentJob phase.  A job without a phase yet is pending.
SEED_STATUS: dict[str, str] = {
    "Pending": "pending",
    "Waiting": "waiting",
    "Running": "running",
    "Succeeded": "completed",
    "Failed": "failed",
    "Skipped": "skipped",
    "Queued": "queued",
    "AwaitingApproval": "awaiting_approval",
    "Cancelled": "cancelled",
}
PHASES_BY_FILTER: dict[str, frozenset[str]] = {
    **{seed: frozenset({phase}) for phase, seed in SEED_STATUS.items()},
    **{phase.lower(): frozenset({phase}) for phase in SEED_STATUS},
}


def phases_for(status: str) -> frozenset[str] | None:
    """Phases selected by a ``status`` filter (seed value or phase, any case), or None."""
    return PHASES_BY_FILTER.get(status.strip().lower())


def _annotations(obj: Obj) -> Mapping[str, str]:
    return obj.get("metadata", {}).get("annotations") or {}


def chain_id_of(obj: Obj) -> str | None:
    value = _annotations(obj).get(models.CHAIN_ID) or (obj.get("status") or {}).get("chainId")
    return str(value) if value else None


def parent_of(obj: Obj) -> str | None:
    value = _annotations(obj).get(models.PARENT_JOB) or (obj.get("status") or {}).get("parentJobId")
    return str(value) if value else None


def _chain_path(obj: Obj) -> list[str]:
    raw = _annotations(obj).get(models.CHAIN_PATH)
    if raw:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, list):
            return [str(v) for v in value]
    return [str(v) for v in (obj.get("status") or {}).get("chainPath") or []]


def _chain_depth(obj: Obj) -> int | None:
    raw = _annotations(obj).get(models.CHAIN_DEPTH)
    if raw is not None and raw.isascii() and raw.isdigit():
        return int(raw)
    depth = (obj.get("status") or {}).get("chainDepth")
    return depth if isinstance(depth, int) else None


def usage_view(usage: object, currency: str | None) -> Obj | None:
    """What the agent reported (tokens, cost with its chain budget's currency), or None."""
    if not isinstance(usage, dict):
        return None
    tokens, cost, turns = usage.get("tokens"), usage.get("cost"), usage.get("turns")
    view: Obj = {
        "tokens": tokens if isinstance(tokens, int) else 0,
        "cost": cost if isinstance(cost, int | float) else 0.0,
        "currency": currency or DEFAULT_CURRENCY,
    }
    if isinstance(turns, int) and not isinstance(turns, bool) and turns > 0:
        view["turns"] = turns  # Only a runtime that counts turns reports them.
    for name in ("inputTokens", "outputTokens"):  # Only a runtime that splits its tokens.
        count = usage.get(name)
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            view[name] = count
    return view


def usage_total(usages: Iterable[Obj | None], currency: str) -> Obj | None:
    """Reported usages (``usage_view``s) summed; None when no agent reported any."""
    reported = [u for u in usages if u]
    if not reported:
        return None
    total: Obj = {
        "tokens": sum(u["tokens"] for u in reported),
        "cost": round(sum(u["cost"] for u in reported), 6),
        "currency": currency,
        "reportedBy": len(reported),
    }
    # The split is summed over the jobs that report one; ``splitBy`` says how many, so
    # a chain whose runtimes only partly split is not read as all input or output.
    split = [u for u in reported if "inputTokens" in u or "outputTokens" in u]
    if split:
        total["inputTokens"] = sum(u.get("inputTokens", 0) for u in split)
        total["outputTokens"] = sum(u.get("outputTokens", 0) for u in split)
        total["splitBy"] = len(split)
    return total


def chain_currency(objs: Iterable[Obj], agents: Mapping[str, AiAgentSpec]) -> str:
    """The currency of the chain's budget: its first agent's (as the usage route says).

    ``objs`` are jobs of one chain (their chain paths start with the same agent);
    ``agents`` the namespace's AiAgents by triggerName."""
    path = next((p for p in map(_chain_path, objs) if p), [])
    first = agents.get(path[0]) if path else None
    budget = first.budget if first is not None else None
    return budget.currency if budget is not None else DEFAULT_CURRENCY


def job_view(obj: Obj, currency: str | None = None) -> dict[str, Any]:
    """Seed 003's job fields (plus namespace, phase, reason and what came next), and
    flow control's: who stopped it or superseded it, who approved it and when, the
    attempt and when a retry starts, the usage its agent reported (in ``currency``,
    the chain budget's; the default when None).  A field the status lacks is null."""
    meta = obj.get("metadata", {})
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    phase = status.get("phase") or "Pending"
    return {
        "id": meta.get("name"),
        "namespace": meta.get("namespace"),
        "type": spec.get("type"),
        "agentRole": spec.get("agentRole"),
        "origin": spec.get("origin"),
        "chainId": chain_id_of(obj),
        "chainDepth": _chain_depth(obj),
        "parentJobId": parent_of(obj),
        "chainPath": _chain_path(obj),
        "delegation": spec.get("delegation") or [],
        "status": SEED_STATUS.get(phase, phase.lower()),
        "phase": phase,
        "reason": status.get("reason"),
        "message": status.get("message"),
        "result": status.get("result"),
        "resultTruncated": status.get("resultTruncated"),
        "resultSize": status.get("resultSize"),
        "exitCode": status.get("exitCode"),
        "createdAt": meta.get("creationTimestamp"),
        "startedAt": status.get("startTime"),
        "completedAt": status.get("completionTime"),
        "next": status.get("next") or [],
        "chainComplete": status.get("chainComplete"),
        "stoppedBy": status.get("stoppedBy"),
        "supersededBy": status.get("supersededBy"),
        "approvedBy": status.get("approvedBy"),
        "approvedAt": status.get("approvedAt"),
        "attempt": status.get("attempt"),
        "retryAt": status.get("retryAt"),
        "usage": usage_view(status.get("usage"), currency),
    }


def sort_key(obj: Obj) -> tuple[str, str, str]:
    """Newest first is the reverse of this order (RFC 3339 UTC sorts as text)."""
    meta = obj.get("metadata", {})
    return (
        str(meta.get("creationTimestamp") or ""),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def chain_tree(
    chain_id: str,
    namespace: str,
    jobs: Iterable[Obj],
    record: ChainRecord | None,
    currency: str = DEFAULT_CURRENCY,
) -> dict[str, Any]:
    """A chain as nested jobs (children by ``parentJobId``), oldest first, with its record
    and the usage its jobs reported, summed in ``currency`` (its first agent's budget's).

    A job whose parent is not in the chain (deleted, or out of view) is shown as a
    root rather than dropped, so nothing the chain did is hidden.
    """
    views = sorted(
        (job_view(obj, currency) for obj in jobs), key=lambda v: (v["createdAt"] or "", v["id"])
    )
    nodes = {v["id"]: {**v, "children": []} for v in views}
    roots: list[dict[str, Any]] = []
    for view in views:
        node = nodes[view["id"]]
        parent = nodes.get(view["parentJobId"] or "")
        (parent["children"] if parent is not None and parent is not node else roots).append(node)
    return {
        "chainId": chain_id,
        "namespace": namespace,
        "jobCount": len(views),
        "complete": record.complete if record else False,
        "outcome": record.outcome if record else None,
        "lastJob": record.last_job if record else None,
        "completedAt": record.completed_at if record else None,
        "hops": record.hops if record else [],
        "usage": usage_total((v["usage"] for v in views), currency),
        "roots": roots,
    }
