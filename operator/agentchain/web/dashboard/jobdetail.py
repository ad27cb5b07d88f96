"""A job as its dashboard page shows it: pure assembly of what the handler read.

The page shows seed 003's job detail (chain path, chain id, parent, depth) and what
a person debugging a chain needs besides: times and a phase history, the prompt as
the operator built it (the ``<chain-context>`` block apart from the original
prompt, so it is visibly the parent's output and not the user's words), the result,
whether the full output is there, the job's anchor and its chain's team anchor, and
its Events.  Every string is data for the page to show as text.

The prompt is what the operator *added*: the ``<chain-context>`` block it built and
the original prompt (rendered from the agent's template when the job carried none).
Sections a prompt may gain at start (learnings, store entries, dependency results)
are not rebuilt here, and the exact bytes are in the job's Secret, which the
operator only writes (least privilege), so the page says so.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from agentchain.store.chainrecords import ChainRecord
from agentchain.store.outputs import OutputRecord
from agentchain.web import serializers

Obj = dict[str, Any]
PROMPT_NOTE = (
    "The <chain-context> block and the original prompt, as the operator built them; "
    "learnings, store entries or dependency results added at start are not shown."
)


def _at(value: object) -> str:
    return str(value) if value else ""


def history(obj: Obj, record: ChainRecord | None) -> list[Obj]:
    """Creation, start, conditions, hops and completion, oldest first."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    name = meta.get("name")
    rows: list[Obj] = [{"at": _at(meta.get("creationTimestamp")), "what": "created"}]
    if status.get("startTime"):
        rows.append({"at": _at(status["startTime"]), "what": "started"})
    for cond in status.get("conditions") or []:
        what = f"{cond.get('type')}={cond.get('status')}"
        rows.append(
            {
                "at": _at(cond.get("lastTransitionTime")),
                "what": what,
                "reason": cond.get("reason"),
                "message": cond.get("message"),
            }
        )
    for hop in record.hops if record else []:
        if hop.get("jobName") == name:
            rows.append(
                {
                    "at": _epoch_text(hop.get("at")),
                    "what": f"{hop.get('phase')}: next {hop.get('decision')}",
                    "message": hop.get("detail") or None,
                }
            )
    if status.get("completionTime"):
        rows.append({"at": _at(status["completionTime"]), "what": status.get("phase") or "ended"})
    # By instant, not text ("…Z" and "…+00:00" both occur); ties keep the order above.
    return sorted(rows, key=lambda r: _instant(r["at"]))


def _instant(value: str) -> dt.datetime:
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return dt.datetime.min.replace(tzinfo=dt.UTC)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _epoch_text(value: object) -> str:
    if not isinstance(value, int | float):
        return ""
    return dt.datetime.fromtimestamp(value, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def output_summary(record: OutputRecord | None) -> Obj:
    if record is None:
        return {
            "available": False,
            "reason": "Not captured yet: the job has not ended, or its output expired.",
        }
    if not record.available:
        return {"available": False, "reason": f"Output unavailable: {record.unavailable_reason}"}
    return {
        "available": True,
        "fullSize": record.full_size,
        "truncated": record.truncated,
        "capturedAt": record.captured_at,
    }


def events_view(events: Iterable[Obj]) -> list[Obj]:
    return [
        {
            "type": e.get("type"),
            "reason": e.get("reason"),
            "message": e.get("message"),
            "count": e.get("count"),
            "at": e.get("lastTimestamp") or e.get("eventTime"),
        }
        for e in events
    ]


def detail(obj: Obj, *, original: str, record: ChainRecord | None, **parts: Any) -> Obj:
    """Everything the job page shows; ``parts`` are the other reads, passed through."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    view = serializers.job_view(obj, parts.pop("currency", None))
    running = view["phase"] == "Running" and bool(status.get("podName"))
    return {
        "job": view,
        "prompt": {
            "chainContext": spec.get("chainContext"),
            "original": original,
            "note": PROMPT_NOTE,
        },
        "event": spec.get("event"),
        "history": history(obj, record),
        "podName": status.get("podName"),
        "attempt": status.get("attempt"),
        "live": running,
        "usage": view["usage"],
        **parts,
    }
