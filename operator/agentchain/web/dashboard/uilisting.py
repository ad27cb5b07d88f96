"""The dashboard's jobs list: filters, sorting and keyset pages over the API's listing.

What is read is bounded as the job API's is (``api.py``, ``listing.py``): the chain
and the agent go to the API server as a label selector and every read is paged with
``limit``/``continue``; the phase and the repository (no labels) are filtered here.
The browser only ever holds one page: a page ends with a cursor that encodes the
last row's (sort value, namespace, name), so paging on through thousands of jobs
never repeats or skips a row when jobs are created in between.

Sorting and filtering are pure functions of the objects, tested in
``tests/unit/web/dashboard/test_uilisting.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentchain.web import serializers
from agentchain.web.schemas import DNS_LABEL

Obj = dict[str, Any]
Key = tuple[str, str, str]
SortField = Literal["created", "agent", "phase", "name", "namespace"]
MAX_PAGE = 200


class UiJobQuery(BaseModel):
    """``GET /ui/api/jobs``: every filter optional, newest first by default."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    namespace: str | None = Field(default=None, pattern=DNS_LABEL, max_length=63)
    agent: str | None = Field(default=None, min_length=1, max_length=63)
    phase: str | None = Field(default=None, min_length=1, max_length=32)
    chain: str | None = Field(default=None, min_length=1, max_length=253)
    repository: str | None = Field(default=None, min_length=1, max_length=200)
    sort: SortField = "created"
    order: Literal["asc", "desc"] = "desc"
    limit: int = Field(default=50, ge=1, le=MAX_PAGE)
    continue_: str | None = Field(default=None, alias="continue", max_length=2048)


def sort_value(obj: Obj, field: SortField) -> str:
    meta = obj.get("metadata") or {}
    if field == "created":
        return str(meta.get("creationTimestamp") or "")
    if field == "agent":
        return str((obj.get("spec") or {}).get("agentRole") or "")
    if field == "phase":
        return str((obj.get("status") or {}).get("phase") or "Pending")
    return str(meta.get(field) or "")


def key_of(obj: Obj, field: SortField) -> Key:
    meta = obj.get("metadata") or {}
    return sort_value(obj, field), str(meta.get("namespace") or ""), str(meta.get("name") or "")


def repository_of(obj: Obj) -> str | None:
    event = (obj.get("spec") or {}).get("event") or {}
    value = event.get("repository")
    return str(value) if value else None


def matches(obj: Obj, query: UiJobQuery, phases: frozenset[str] | None) -> bool:
    """The filters the API server could not apply (and the exact ones it approximated)."""
    if query.chain is not None and serializers.chain_id_of(obj) != query.chain:
        return False
    if query.agent is not None and (obj.get("spec") or {}).get("agentRole") != query.agent:
        return False
    if query.repository is not None and repository_of(obj) != query.repository:
        return False
    phase = (obj.get("status") or {}).get("phase") or "Pending"
    return phases is None or phase in phases


def phases_for(value: str) -> frozenset[str] | None:
    """A seed 003 status or a phase, any case, including phases this module has not heard
    of (``Queued``, ``AwaitingApproval``, ``Cancelled``): a phase is matched by name."""
    known = serializers.phases_for(value)
    if known is not None:
        return known
    text = value.strip()
    if not text.isascii() or not text.replace("-", "").isalnum():
        return None
    return frozenset({text[:1].upper() + text[1:], text})


def page(
    objs: Iterable[Obj], query: UiJobQuery, after: Key | None
) -> tuple[list[Obj], Key | None, int]:
    """One page in the asked order, the key to continue after (or None) and the total."""
    descending = query.order == "desc"
    ordered = sorted(objs, key=lambda o: key_of(o, query.sort), reverse=descending)
    total = len(ordered)
    if after is not None:
        ordered = [
            o
            for o in ordered
            if (key_of(o, query.sort) < after) == descending and key_of(o, query.sort) != after
        ]
    rows = ordered[: query.limit]
    more = len(ordered) > query.limit
    return rows, (key_of(rows[-1], query.sort) if more else None), total
