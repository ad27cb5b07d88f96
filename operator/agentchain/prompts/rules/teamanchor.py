"""The team anchor of a chain (SPEC §6, seed 004): what the operator knows of the whole team.

The operator keeps one anchor per chain: its jobs and their status, the hand-offs between
agents, the escalations, and its own decisions.  It is stored as compact JSON of at most
``limit`` bytes (:data:`~agentchain.memory.anchors.TEAM_ANCHOR_MAX_BYTES`).  Empty parts
are left out; the full shape is::

    {"chainId": "c-1a2b",
     "jobs": {"<job>": {"agent", "depth", "phase", "reason", "attempt", "updatedAt"}},
     "handoffs":    [{"from", "fromAgent", "to", "toAgent", "at"}],
     "escalations": [{"from", "fromAgent", "to", "toAgent", "reason", "at"}],
     "decisions":   [{"job", "agent", "action", "child", "childAgent", "reason",
                      "message", "at"}],
     "complete": {"outcome", "lastJob", "at"},
     "truncated": true,
     "dropped": {"jobs": n, "handoffs": n, "escalations": n, "decisions": n}}

``jobs`` is ordered by depth, then name, and lists are oldest first, so the same facts
always give the same bytes.  ``attempt`` appears from the second attempt on.

The engine calls the ``*_update`` functions inside
:meth:`~agentchain.memory.anchors.AnchorStore.update_team_anchor`, which re-runs them
whenever another writer got in first, so they are pure and return a new dict.  They are
shaped by three facts:

* **The stored anchor may be old or damaged.**  Each part is read on its own; a part of the
  wrong type starts fresh, entries that are not objects and fields that are not of the
  expected type are dropped, fields this version does not know are dropped.  Reading never
  raises.
* **Calls are replayed.**  After a crash the engine repeats the call it was making, so
  applying an update twice gives the same anchor as applying it once: a job's entry is
  replaced, a hop is recorded once per (parent, action, child), the completion record is
  replaced.  An update older than what is recorded (by ``at``; the operator writes ISO
  timestamps, which sort as strings) is ignored, so a late replay cannot roll a job back.
* **The anchor must fit.**  :func:`fit` shrinks in this order: the oldest decisions, the
  oldest hand-offs, the oldest escalations, then messages (shortened, then removed), then
  the least recently updated jobs; ``chainId`` and ``complete`` are always kept, and
  ``truncated``/``dropped`` tell a reader what is missing.  The entry an update has just
  written is never dropped: were it dropped, a replay would add it again and drop it
  again, counting it twice.  For the smallest form to fit whatever the input, every
  string but messages is cut to a byte budget derived from the limit (377 bytes at 4,096,
  far above real names and timestamps; 19 at 512) and the chain id to 64 bytes (ids are
  label values).  Messages are cut to 200 characters.

A spawned child of a parent recorded as ``Failed`` is an *escalation* (``on-failure`` or
failurePolicy ``notify`` ran it); any other spawned child is a *hand-off*.  ``skipped``,
``refused``, ``stopped`` and ``none`` (the chain ends normally) are operator *decisions*.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

MIN_LIMIT = 512
CHAIN_ID_MAX_BYTES = 64
MESSAGE_MAX_CHARS = 200
SHORT_MESSAGE_CHARS = 40
HOP_ACTIONS = frozenset({"spawned", "skipped", "refused", "stopped", "none"})
ELLIPSIS = "…"

# Depth and attempt beyond this are not real: left out, which also bounds their size.
_NUMBER_MAX = 9_999
_COUNT_MAX = 999_999
_COUNTED = ("jobs", "handoffs", "escalations", "decisions")
_JOB_TEXT = ("agent", "phase", "reason", "updatedAt")
_COMPLETE_FIELDS = ("outcome", "lastJob", "at")
_LIST_FIELDS: dict[str, tuple[str, ...]] = {
    "handoffs": ("from", "fromAgent", "to", "toAgent", "at"),
    "escalations": ("from", "fromAgent", "to", "toAgent", "reason", "at"),
    "decisions": (
        "job",
        "agent",
        "action",
        "child",
        "childAgent",
        "reason",
        "message",
        "at",
    ),
}

Record = dict[str, str]


def serialized_size(anchor: Mapping[str, Any]) -> int:
    """Bytes of the compact JSON that is stored and measured against the limit."""
    text = json.dumps(anchor, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8"))


def job_update(
    anchor: Mapping[str, Any],
    *,
    chain_id: str,
    job: str,
    agent: str,
    depth: int | None,
    phase: str,
    reason: str | None,
    attempt: int | None,
    at: str,
    limit: int,
) -> dict[str, Any]:
    """Record or refresh one job's status (an older update than the recorded one is ignored)."""
    budget = _field_budget(limit)
    team = _read(anchor, budget)
    team.chain_id = _cut(chain_id, CHAIN_ID_MAX_BYTES)
    name = _cut(job, budget)
    raw = {
        "agent": agent,
        "depth": depth,
        "phase": phase,
        "reason": reason,
        "attempt": attempt,
        "updatedAt": at,
    }
    entry = _job_entry(raw, budget)
    if not _older(entry.get("updatedAt"), team.jobs.get(name, {}).get("updatedAt")):
        team.jobs[name] = entry
    return _fit(team, limit, keep_job=name)


def hop_update(
    anchor: Mapping[str, Any],
    *,
    chain_id: str,
    parent: str,
    parent_agent: str,
    action: str,
    child: str | None,
    child_agent: str | None,
    reason: str,
    message: str,
    at: str,
    limit: int,
) -> dict[str, Any]:
    """Record what followed ``parent``: a hand-off, an escalation or a decision, once."""
    if action not in HOP_ACTIONS:
        raise ValueError(f"unknown hop action {action!r}; expected one of {sorted(HOP_ACTIONS)}")
    if action == "spawned" and child is None:
        raise ValueError("a spawned hop needs the child job")
    budget = _field_budget(limit)
    team = _read(anchor, budget)
    team.chain_id = _cut(chain_id, CHAIN_ID_MAX_BYTES)
    kind = _hop_kind(team, action, _cut(parent, budget))
    # One superset of fields; each list keeps those it records (a hop is from/to, a
    # decision is job/child).
    raw = {
        "from": parent,
        "fromAgent": parent_agent,
        "to": child,
        "toAgent": child_agent,
        "job": parent,
        "agent": parent_agent,
        "action": action,
        "child": child,
        "childAgent": child_agent,
        "reason": reason,
        "message": message,
        "at": at,
    }
    entry = _record(raw, _LIST_FIELDS[kind], budget)
    recorded = _find_hop(team, _hop_key(entry))
    if recorded is None:
        team.lists[kind].append(entry)
        recorded = entry
    return _fit(team, limit, keep_entry=recorded)


def complete_update(
    anchor: Mapping[str, Any],
    *,
    chain_id: str,
    outcome: str,
    last_job: str,
    at: str,
    limit: int,
) -> dict[str, Any]:
    """Mark the chain complete (replacing an earlier record unless this one is older)."""
    budget = _field_budget(limit)
    team = _read(anchor, budget)
    team.chain_id = _cut(chain_id, CHAIN_ID_MAX_BYTES)
    raw = {"outcome": outcome, "lastJob": last_job, "at": at}
    record = _record(raw, _COMPLETE_FIELDS, budget)
    previous = team.complete or {}
    if not _older(record.get("at"), previous.get("at")):
        team.complete = record
    return _fit(team, limit)


def fit(anchor: Mapping[str, Any], limit: int) -> dict[str, Any]:
    """``anchor`` read tolerantly and shrunk to at most ``limit`` bytes (see module doc)."""
    return _fit(_read(anchor, _field_budget(limit)), limit)


# --- the anchor while it is being changed ------------------------------------------------


@dataclass
class _Team:
    chain_id: str | None
    jobs: dict[str, dict[str, Any]]
    lists: dict[str, list[Record]]
    complete: Record | None
    truncated: bool
    dropped: dict[str, int] = field(default_factory=dict)

    def render(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.chain_id is not None:
            out["chainId"] = self.chain_id
        if self.jobs:
            out["jobs"] = {name: self.jobs[name] for name in sorted(self.jobs, key=self._order)}
        out.update({kind: entries for kind, entries in self.lists.items() if entries})
        if self.complete:
            out["complete"] = self.complete
        if self.truncated:
            out["truncated"] = True
        if self.dropped:
            out["dropped"] = {k: self.dropped[k] for k in _COUNTED if k in self.dropped}
        return out

    def _order(self, name: str) -> tuple[bool, int, str]:
        depth = self.jobs[name].get("depth")
        return depth is None, depth or 0, name

    def recency(self, name: str) -> tuple[str, int, str]:
        """Sort key of a job: the least recently updated (then shallowest) goes first."""
        entry = self.jobs[name]
        return entry.get("updatedAt", ""), entry.get("depth", -1), name


def _read(anchor: object, budget: int) -> _Team:
    src: Mapping[Any, Any] = anchor if isinstance(anchor, Mapping) else {}
    chain_id = src.get("chainId")
    return _Team(
        chain_id=_cut(chain_id, CHAIN_ID_MAX_BYTES) if isinstance(chain_id, str) else None,
        jobs=_read_jobs(src.get("jobs"), budget),
        lists={
            kind: _read_list(src.get(kind), fields, budget) for kind, fields in _LIST_FIELDS.items()
        },
        complete=_record(src.get("complete"), _COMPLETE_FIELDS, budget) or None,
        truncated=src.get("truncated") is True,
        dropped=_read_counts(src.get("dropped")),
    )


def _read_jobs(raw: object, budget: int) -> dict[str, dict[str, Any]]:
    if not isinstance(raw, Mapping):
        return {}
    return {
        _cut(name, budget): _job_entry(entry, budget)
        for name, entry in raw.items()
        if isinstance(name, str) and isinstance(entry, Mapping)
    }


def _read_counts(raw: object) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        return {}
    counts = {kind: raw.get(kind) for kind in _COUNTED}
    # bool is an int to Python but never a count.
    return {kind: min(n, _COUNT_MAX) for kind, n in counts.items() if type(n) is int and n > 0}


def _read_list(raw: object, fields: tuple[str, ...], budget: int) -> list[Record]:
    if not isinstance(raw, list):
        return []
    return [record for item in raw if (record := _record(item, fields, budget))]


def _job_entry(raw: Mapping[str, Any], budget: int) -> dict[str, Any]:
    text = _record(raw, _JOB_TEXT, budget)
    entry: dict[str, Any] = {"agent": text.get("agent")}
    if _is_number(depth := raw.get("depth"), 0):
        entry["depth"] = depth
    entry.update(phase=text.get("phase"), reason=text.get("reason"))
    # A first attempt is the normal case and not worth the bytes.
    if _is_number(attempt := raw.get("attempt"), 2):
        entry["attempt"] = attempt
    entry["updatedAt"] = text.get("updatedAt")
    return {key: value for key, value in entry.items() if value is not None}


def _record(raw: object, fields: tuple[str, ...], budget: int) -> Record:
    """The non-empty string ``fields`` of ``raw``, in that order and cut to size."""
    if not isinstance(raw, Mapping):
        return {}
    out: Record = {}
    for name in fields:
        value = raw.get(name)
        if not isinstance(value, str) or not value:
            continue
        # Messages go before the anchor reaches its smallest form, so characters bound them.
        if name == "message":
            out[name] = _cut(value, max_chars=MESSAGE_MAX_CHARS)
        else:
            out[name] = _cut(value, budget)
    return out


def _is_number(value: object, low: int) -> bool:
    # bool is an int to Python but never a depth or an attempt.
    return type(value) is int and low <= value <= _NUMBER_MAX


def _older(new_at: str | None, recorded_at: object) -> bool:
    """Whether an update stamped ``new_at`` predates the record (unknown times: it does not)."""
    if not new_at or not isinstance(recorded_at, str) or not recorded_at:
        return False
    return new_at < recorded_at


# --- hops ---------------------------------------------------------------------------------


def _hop_kind(team: _Team, action: str, parent: str) -> str:
    if action != "spawned":
        return "decisions"
    if team.jobs.get(parent, {}).get("phase") == "Failed":
        return "escalations"
    return "handoffs"


def _hop_key(entry: Record) -> tuple[str | None, str | None, str | None]:
    # Hand-offs and escalations are spawned hops and carry no "action" field.
    return (
        entry.get("from", entry.get("job")),
        entry.get("action", "spawned"),
        entry.get("to", entry.get("child")),
    )


def _find_hop(team: _Team, key: tuple[str | None, str | None, str | None]) -> Record | None:
    # Searched in every list: the parent's phase, which picks the list, may have changed
    # or been dropped since the hop was first recorded.
    for entries in team.lists.values():
        for entry in entries:
            if _hop_key(entry) == key:
                return entry
    return None


# --- fitting ------------------------------------------------------------------------------


def _fit(
    team: _Team, limit: int, *, keep_job: str | None = None, keep_entry: Record | None = None
) -> dict[str, Any]:
    def fits() -> bool:
        return serialized_size(team.render()) <= limit

    for kind in ("decisions", "handoffs", "escalations"):
        _drop_until(team, fits, kind, [e for e in team.lists[kind] if e is not keep_entry])
    for chars in (SHORT_MESSAGE_CHARS, 0):
        if not fits():
            _shorten_messages(team, chars)
    _drop_until(team, fits, "jobs", sorted(set(team.jobs) - {keep_job}, key=team.recency))
    return team.render()


def _drop_until(team: _Team, fits: Callable[[], bool], kind: str, order: list[Any]) -> None:
    """Drop the first entries of ``order`` (list records or job names), as few as fit.

    Each drop shrinks the anchor (by more than the count it adds), so the fewest drops
    that fit are found by bisection: O(log n) renders, not one per drop, which made a
    damaged anchor of a few thousand entries take minutes.
    """
    if not order or fits():
        return
    base = team.dropped.get(kind, 0)
    entries = team.lists.get(kind, [])
    jobs = team.jobs

    def drop(count: int) -> None:
        gone = {id(item) for item in order[:count]} if kind != "jobs" else set(order[:count])
        if kind == "jobs":
            team.jobs = {name: entry for name, entry in jobs.items() if name not in gone}
        else:
            team.lists[kind] = [entry for entry in entries if id(entry) not in gone]
        team.dropped[kind] = min(base + count, _COUNT_MAX)
        team.truncated = True

    low, high = 1, len(order)
    while low < high:
        middle = (low + high) // 2
        drop(middle)
        low, high = (low, middle) if fits() else (middle + 1, high)
    drop(low)


def _shorten_messages(team: _Team, chars: int) -> bool:
    """Cut every decision message to ``chars`` (0 removes it); whether anything changed."""
    changed = False
    for entry in team.lists["decisions"]:
        message = entry.get("message")
        if message is None:
            continue
        if chars == 0:
            del entry["message"]
        elif len(message) > chars:
            entry["message"] = _cut(message, max_chars=chars)
        else:
            continue
        changed = True
    team.truncated = team.truncated or changed
    return changed


# --- sizes --------------------------------------------------------------------------------


def _json_bytes(text: str) -> int:
    """Bytes ``text`` takes inside a JSON string (escapes included, quotes not)."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


def _cut(text: str, max_bytes: int | None = None, max_chars: int | None = None) -> str:
    """``text`` within the bounds, ending in an ellipsis when cut; never splits a code point.

    ``max_bytes`` counts the bytes inside the JSON string, escapes included.  Lone
    surrogates, which UTF-8 cannot encode, become ``?``.
    """
    text = text.encode("utf-8", "replace").decode("utf-8")
    chars = len(text) if max_chars is None else max_chars
    room = _json_bytes(text) if max_bytes is None else max_bytes
    if len(text) <= chars and _json_bytes(text) <= room:
        return text
    kept: list[str] = []
    used = _json_bytes(ELLIPSIS)
    for char in text[: chars - 1]:
        used += _json_bytes(char)
        if used > room:
            break
        kept.append(char)
    return "".join(kept) + ELLIPSIS


def _smallest_forms() -> tuple[int, int]:
    """Bytes and strings of the largest anchor that :func:`fit` can shrink no further.

    That is: chain id, completion record, the entry just written (its message removed),
    the truncation marker and full counts, every string empty.
    """
    base: dict[str, Any] = {
        "chainId": "",
        "complete": dict.fromkeys(_COMPLETE_FIELDS, ""),
        "truncated": True,
        "dropped": dict.fromkeys(_COUNTED, _COUNT_MAX),
    }
    job: dict[str, Any] = {name: "" for name in _JOB_TEXT}
    job.update(depth=_NUMBER_MAX, attempt=_NUMBER_MAX)
    parts: list[tuple[dict[str, Any], int]] = [({"jobs": {"": job}}, 1 + len(_JOB_TEXT))]
    for kind, fields in _LIST_FIELDS.items():
        kept = [name for name in fields if name != "message"]
        parts.append(({kind: [dict.fromkeys(kept, "")]}, len(kept)))
    size = max(serialized_size(base | part) for part, _ in parts)
    strings = len(_COMPLETE_FIELDS) + max(count for _, count in parts)
    return size + CHAIN_ID_MAX_BYTES, strings


_SMALLEST_BYTES, _SMALLEST_STRINGS = _smallest_forms()


def _field_budget(limit: int) -> int:
    """Bytes each string may take so that the smallest form fits in ``limit``."""
    if limit < MIN_LIMIT:
        raise ValueError(f"a team anchor limit must be at least {MIN_LIMIT} bytes, not {limit}")
    return (limit - _SMALLEST_BYTES) // _SMALLEST_STRINGS
