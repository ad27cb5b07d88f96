"""The team anchor of a chain (SPEC §6): what the operator records, and that it always fits.

Aspects covered:
- ``job_update``: the entry's exact shape, optional fields left out (depth, reason, a first
  attempt), the entry replaced, jobs ordered by depth then name, an older update ignored;
- ``hop_update``: a spawned child of a Failed parent is an escalation, of a Succeeded,
  Skipped or unrecorded parent a hand-off; skipped/refused/stopped/none are decisions
  with reason and message; messages cut to 200 characters without splitting one; bad
  actions refused;
- ``complete_update``: the record, replaced by a later one, not by an older one;
- replays: the same update twice gives the anchor of once, also after the parent's phase
  changed or other updates came in between;
- ``fit``: an anchor that fits is left alone; the order of shrinking (oldest decisions,
  hand-offs, escalations, messages, least recent jobs), what is always kept (chainId,
  complete, the entry just written), the ``truncated`` marker and counts;
- inputs are never mutated; malformed or old anchors are read without raising;
- ``serialized_size`` is the compact UTF-8 JSON measure; limits below the minimum refused;
- properties, for any sequence of updates with any text and limits 512 to 4,096: every
  result is JSON within the limit, keeps the chain id, is unchanged by replaying the last
  update and by ``fit``, and leaves its input alone; the same for garbage anchors.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentchain.prompts.rules import teamanchor
from agentchain.prompts.rules.teamanchor import complete_update, fit, hop_update, job_update

LIMIT = 4096
CHAIN = "c-1a2b3c"
T0 = "2024-05-01T12:00:00Z"
T1 = "2024-05-01T12:00:01Z"
T2 = "2024-05-01T12:00:02Z"
T3 = "2024-05-01T12:00:03Z"

Anchor = dict[str, Any]
Update = Callable[[Mapping[str, Any]], Anchor]


def job(anchor: Mapping[str, Any], name: str, phase: str, **kw: Any) -> Anchor:
    args: dict[str, Any] = {
        "chain_id": CHAIN,
        "job": name,
        "agent": f"agent-{name}",
        "depth": 0,
        "phase": phase,
        "reason": None,
        "attempt": None,
        "at": T0,
        "limit": LIMIT,
    }
    return job_update(anchor, **(args | kw))


def hop(
    anchor: Mapping[str, Any], parent: str, action: str, child: str | None, **kw: Any
) -> Anchor:
    args: dict[str, Any] = {
        "chain_id": CHAIN,
        "parent": parent,
        "parent_agent": f"agent-{parent}",
        "action": action,
        "child": child,
        "child_agent": None if child is None else f"agent-{child}",
        "reason": "Reason",
        "message": "Why.",
        "at": T1,
        "limit": LIMIT,
    }
    return hop_update(anchor, **(args | kw))


def complete(anchor: Mapping[str, Any], **kw: Any) -> Anchor:
    args: dict[str, Any] = {
        "chain_id": CHAIN,
        "outcome": "succeeded",
        "last_job": "j1",
        "at": T2,
        "limit": LIMIT,
    }
    return complete_update(anchor, **(args | kw))


def size(anchor: Mapping[str, Any]) -> int:
    return teamanchor.serialized_size(anchor)


# --- job_update ---------------------------------------------------------------------------


def test_first_job_gives_the_whole_shape() -> None:
    anchor = job({}, "j0", "Running", depth=0, reason="Started", attempt=2)
    assert anchor == {
        "chainId": CHAIN,
        "jobs": {
            "j0": {
                "agent": "agent-j0",
                "depth": 0,
                "phase": "Running",
                "reason": "Started",
                "attempt": 2,
                "updatedAt": T0,
            }
        },
    }


@pytest.mark.parametrize("attempt", [None, 0, 1, True, 10_000])
def test_first_attempts_missing_reason_and_depth_are_left_out(attempt: int | None) -> None:
    anchor = job({}, "j0", "Pending", depth=None, attempt=attempt)
    assert anchor["jobs"]["j0"] == {"agent": "agent-j0", "phase": "Pending", "updatedAt": T0}


def test_a_job_update_replaces_the_entry() -> None:
    anchor = job(job({}, "j0", "Running"), "j0", "Succeeded", reason="Succeeded", at=T1)
    assert anchor["jobs"] == {
        "j0": {
            "agent": "agent-j0",
            "depth": 0,
            "phase": "Succeeded",
            "reason": "Succeeded",
            "updatedAt": T1,
        }
    }


def test_jobs_are_ordered_by_depth_then_name() -> None:
    anchor: Anchor = {}
    for name, depth in [("z", 0), ("b", 2), ("a", 2), ("m", 1), ("nodepth", None)]:
        anchor = job(anchor, name, "Running", depth=depth)
    assert list(anchor["jobs"]) == ["z", "m", "a", "b", "nodepth"]
    assert list(json.loads(json.dumps(anchor))["jobs"]) == ["z", "m", "a", "b", "nodepth"]


def test_an_older_job_update_does_not_roll_the_job_back() -> None:
    done = job(job({}, "j0", "Running", at=T0), "j0", "Succeeded", at=T2)
    assert job(done, "j0", "Running", at=T1) == done


def test_a_retry_after_a_failure_is_recorded() -> None:
    failed = job({}, "j0", "Failed", reason="Failed", at=T0)
    retried = job(failed, "j0", "Running", attempt=2, at=T1)
    assert retried["jobs"]["j0"]["phase"] == "Running"
    assert retried["jobs"]["j0"]["attempt"] == 2


# --- hop_update ---------------------------------------------------------------------------


def test_a_spawned_child_of_a_failed_parent_is_an_escalation() -> None:
    anchor = hop(job({}, "j0", "Failed"), "j0", "spawned", "j1", reason="ConditionNotMet")
    assert anchor["escalations"] == [
        {
            "from": "j0",
            "fromAgent": "agent-j0",
            "to": "j1",
            "toAgent": "agent-j1",
            "reason": "ConditionNotMet",
            "at": T1,
        }
    ]
    assert "handoffs" not in anchor and "decisions" not in anchor


@pytest.mark.parametrize("phase", ["Succeeded", "Skipped", None])
def test_a_spawned_child_of_any_other_parent_is_a_hand_off(phase: str | None) -> None:
    start = {} if phase is None else job({}, "j0", phase)
    anchor = hop(start, "j0", "spawned", "j1")
    assert anchor["handoffs"] == [
        {"from": "j0", "fromAgent": "agent-j0", "to": "j1", "toAgent": "agent-j1", "at": T1}
    ]
    assert "escalations" not in anchor and "decisions" not in anchor


@pytest.mark.parametrize(
    ("action", "child"),
    [("skipped", "j1"), ("refused", "j1"), ("stopped", None), ("none", None)],
)
def test_other_actions_are_decisions(action: str, child: str | None) -> None:
    anchor = hop(job({}, "j0", "Succeeded"), "j0", action, child, reason="R", message="M")
    expected = {"job": "j0", "agent": "agent-j0", "action": action}
    if child is not None:
        expected |= {"child": child, "childAgent": f"agent-{child}"}
    assert anchor["decisions"] == [expected | {"reason": "R", "message": "M", "at": T1}]


@pytest.mark.parametrize("char", ["x", "é", "€", "😀"])
def test_messages_are_cut_to_200_characters_never_splitting_one(char: str) -> None:
    anchor = hop({}, "j0", "stopped", None, message=char * 500)
    message = anchor["decisions"][0]["message"]
    assert len(message) == 200
    assert message == char * 199 + teamanchor.ELLIPSIS
    message.encode("utf-8")


def test_a_message_of_200_characters_is_kept_whole() -> None:
    anchor = hop({}, "j0", "stopped", None, message="é" * 200)
    assert anchor["decisions"][0]["message"] == "é" * 200


def test_unknown_actions_and_childless_spawns_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown hop action"):
        hop({}, "j0", "teleported", "j1")
    with pytest.raises(ValueError, match="needs the child"):
        hop({}, "j0", "spawned", None)


# --- complete_update ----------------------------------------------------------------------


def test_complete_records_the_outcome() -> None:
    anchor = complete(job({}, "j1", "Succeeded"))
    assert anchor["complete"] == {"outcome": "succeeded", "lastJob": "j1", "at": T2}


def test_a_later_completion_replaces_an_older_one_does_not() -> None:
    first = complete({}, at=T2)
    later = complete(first, outcome="failed", last_job="j2", at=T3)
    assert later["complete"] == {"outcome": "failed", "lastJob": "j2", "at": T3}
    assert complete(later, outcome="skipped", at=T1) == later


# --- replays ------------------------------------------------------------------------------


REPLAYS = [
    pytest.param(lambda a: job(a, "j0", "Failed", reason="Again"), id="job"),
    pytest.param(lambda a: hop(a, "j0", "spawned", "j1"), id="escalation"),
    pytest.param(lambda a: hop(a, "j1", "spawned", "j2"), id="hand-off"),
    pytest.param(lambda a: hop(a, "j1", "stopped", None), id="decision"),
    pytest.param(complete, id="complete"),
]


@pytest.mark.parametrize("update", REPLAYS)
def test_an_update_applied_twice_equals_once(update: Update) -> None:
    once = update(job(job({}, "j0", "Failed"), "j1", "Succeeded", depth=1))
    assert update(once) == once


def test_a_replayed_spawn_is_not_recorded_again_after_the_parent_changed() -> None:
    anchor = hop(job({}, "j0", "Failed", at=T0), "j0", "spawned", "j1")
    anchor = job(anchor, "j0", "Succeeded", at=T2)
    replayed = hop(anchor, "j0", "spawned", "j1", at=T3)
    assert replayed == anchor


def test_a_replayed_hop_is_not_recorded_again_after_other_hops() -> None:
    anchor = hop({}, "j0", "spawned", "j1")
    anchor = hop(anchor, "j1", "skipped", "j2")
    anchor = hop(anchor, "j2", "spawned", "j3")
    assert hop(anchor, "j0", "spawned", "j1") == anchor
    assert hop(anchor, "j1", "skipped", "j2", message="reworded") == anchor


def test_the_same_parent_may_record_different_hops() -> None:
    anchor = hop(hop({}, "j0", "spawned", "j1"), "j0", "spawned", "j2")
    assert [h["to"] for h in anchor["handoffs"]] == ["j1", "j2"]


# --- fit ----------------------------------------------------------------------------------


def busy_anchor() -> Anchor:
    """A chain of 8 jobs: hand-offs, an escalation, decisions with long messages."""
    anchor: Anchor = {}
    for i in range(8):
        at = f"2024-05-01T12:00:{i:02d}Z"
        phase = "Failed" if i == 3 else "Succeeded"
        anchor = job(anchor, f"job-{i}", phase, depth=i, at=at, limit=100_000)
        anchor = hop(anchor, f"job-{i}", "spawned", f"job-{i + 1}", at=at, limit=100_000)
        anchor = hop(
            anchor, f"job-{i}", "skipped", f"skip-{i}", at=at, message="m" * 150, limit=100_000
        )
    return complete(anchor, last_job="job-7", limit=100_000)


def test_an_anchor_that_fits_is_left_alone() -> None:
    anchor = busy_anchor()
    assert fit(anchor, 100_000) == anchor
    assert fit(anchor, 100_000) is not anchor


def test_oldest_decisions_go_first() -> None:
    anchor = busy_anchor()
    fitted = fit(anchor, size(anchor) - 200)
    kept = len(fitted["decisions"])
    assert 0 < kept < 8
    assert fitted["decisions"] == anchor["decisions"][-kept:]
    assert fitted["handoffs"] == anchor["handoffs"]
    assert (fitted["truncated"], fitted["dropped"]) == (True, {"decisions": 8 - kept})
    assert size(fitted) <= size(anchor) - 200


def test_then_oldest_hand_offs_then_escalations() -> None:
    anchor = busy_anchor()
    without_decisions = {k: v for k, v in anchor.items() if k != "decisions"}
    fitted = fit(anchor, size(without_decisions) - 100)
    assert "decisions" not in fitted
    kept = len(fitted["handoffs"])
    assert 0 < kept < 7
    assert fitted["handoffs"] == anchor["handoffs"][-kept:]
    assert fitted["escalations"] == anchor["escalations"]
    assert fitted["jobs"] == anchor["jobs"]
    assert fitted["dropped"] == {"handoffs": 7 - kept, "decisions": 8}
    smaller = fit(anchor, 1200)
    assert "handoffs" not in smaller
    assert smaller["escalations"] == anchor["escalations"]
    assert smaller["jobs"] == anchor["jobs"]
    smallest = fit(anchor, 1000)
    assert "escalations" not in smallest
    assert smallest["dropped"]["escalations"] == 1


def test_messages_are_shortened_then_removed_before_jobs_go() -> None:
    anchor: Anchor = {}
    for i in range(6):
        anchor = job(anchor, f"job-{i}", "Succeeded", depth=i)
    anchor = hop(anchor, "job-5", "stopped", None, message="x" * 200)
    fitted = hop(anchor, "job-5", "stopped", None, limit=size(anchor) - 100)
    assert fitted["decisions"][0]["message"] == "x" * 39 + teamanchor.ELLIPSIS
    assert fitted["jobs"] == anchor["jobs"]
    assert fitted["truncated"] is True
    fitted = hop(anchor, "job-5", "stopped", None, limit=size(anchor) - 180)
    assert "message" not in fitted["decisions"][0]
    assert fitted["jobs"] == anchor["jobs"]


def test_as_a_last_resort_only_the_most_recent_jobs_stay() -> None:
    anchor: Anchor = {}
    for i in range(60):
        anchor = job(anchor, f"job-{i:02d}", "Succeeded", depth=i, at=f"2024-05-01T12:{i:02d}:00Z")
    anchor = complete(anchor, last_job="job-59")
    assert size(anchor) <= LIMIT
    fitted = fit(anchor, 1024)
    kept = list(fitted["jobs"])
    assert kept == [f"job-{i:02d}" for i in range(60 - len(kept), 60)]
    assert fitted["dropped"] == {"jobs": 60 - len(kept)}
    assert fitted["chainId"] == CHAIN
    assert fitted["complete"] == anchor["complete"]
    assert size(fitted) <= 1024


def test_the_entry_just_written_is_kept() -> None:
    anchor = busy_anchor()
    oldest = anchor["jobs"]["job-0"]
    refreshed = job(anchor, "job-0", oldest["phase"], at=oldest["updatedAt"], limit=600)
    assert refreshed["jobs"]["job-0"] == oldest
    assert list(refreshed["jobs"])[1:] == list(anchor["jobs"])[-len(refreshed["jobs"]) + 1 :]
    assert refreshed["dropped"]["jobs"] > 0
    escalated = hop(anchor, "job-3", "spawned", "job-4", limit=600)
    assert escalated["escalations"] == anchor["escalations"]


def test_fit_is_idempotent_once_truncated() -> None:
    fitted = fit(busy_anchor(), 1500)
    assert fit(fitted, 1500) == fitted


def test_strings_are_cut_to_a_budget_that_lets_the_smallest_form_fit() -> None:
    huge = "界" * 5000
    anchor = job({}, huge, huge, agent=huge, reason=huge, at=huge, limit=512)
    anchor = hop(
        anchor, huge, "refused", huge, parent_agent=huge, child_agent=huge, reason=huge, limit=512
    )
    anchor = complete(anchor, outcome=huge, last_job=huge, at=huge, limit=512)
    assert size(anchor) <= 512
    assert anchor["chainId"] == CHAIN
    assert anchor["complete"]["outcome"].endswith(teamanchor.ELLIPSIS)


# --- inputs and measures ------------------------------------------------------------------


@pytest.mark.parametrize(
    "update",
    [
        lambda a: job(a, "job-1", "Failed", at=T3),
        lambda a: hop(a, "job-1", "spawned", "new", limit=800),
        lambda a: hop(a, "job-2", "none", None, limit=800),
        lambda a: complete(a, limit=800),
        lambda a: fit(a, 700),
    ],
    ids=["job", "hop", "decision", "complete", "fit"],
)
def test_inputs_are_never_mutated(update: Update) -> None:
    anchor = busy_anchor()
    before = copy.deepcopy(anchor)
    update(anchor)
    assert anchor == before


MALFORMED: list[Any] = [
    [],
    "anchor",
    {"chainId": 5, "jobs": [], "handoffs": "x", "escalations": None, "decisions": {}},
    {"jobs": {"a": 1, "b": None, "c": [], 4: {"phase": "Running"}}},
    {"jobs": {"a": {"depth": True, "attempt": "2", "phase": 3, "updatedAt": ["x"]}}},
    {"jobs": {"a": {"depth": -1, "attempt": 1.5, "agent": {"x": 1}}}},
    {"handoffs": [1, None, "x", [], {"from": 3}, {"from": "a", "to": "b", "at": 7}]},
    {"decisions": [{"job": "a", "action": "stopped", "message": "\ud800 lone surrogate"}]},
    {"complete": "yes", "truncated": "yes", "dropped": {"jobs": "many", "decisions": True}},
    {"dropped": [1, 2], "complete": {"outcome": None}, "unknown": {"deep": [1, 2, 3]}},
    {"dropped": {"jobs": 10**40, "handoffs": -3}},
]


@pytest.mark.parametrize("anchor", MALFORMED)
def test_malformed_anchors_are_read_without_raising(anchor: Any) -> None:
    for update in (
        lambda a: job(a, "a", "Running"),
        lambda a: hop(a, "a", "spawned", "b"),
        lambda a: hop(a, "a", "stopped", None),
        complete,
        lambda a: fit(a, LIMIT),
    ):
        result = update(anchor)
        assert json.loads(json.dumps(result, ensure_ascii=False)) == result
        assert size(result) <= LIMIT


def test_malformed_parts_start_fresh_and_good_parts_survive() -> None:
    anchor = {
        "chainId": CHAIN,
        "jobs": {"a": {"phase": "Failed", "depth": "0"}, "b": "broken"},
        "handoffs": "broken",
        "decisions": [None, {"job": "a", "action": "stopped", "extra": 1}],
        "dropped": {"jobs": 2, "decisions": "x"},
        "truncated": True,
        "newerField": {"x": 1},
    }
    assert fit(anchor, LIMIT) == {
        "chainId": CHAIN,
        "jobs": {"a": {"phase": "Failed"}},
        "decisions": [{"job": "a", "action": "stopped"}],
        "truncated": True,
        "dropped": {"jobs": 2},
    }
    assert fit({"decisions": [{"message": "\ud800"}]}, LIMIT) == {"decisions": [{"message": "?"}]}


def test_serialized_size_is_compact_utf8_json() -> None:
    anchor = {"chainId": "é😀", "jobs": {"a": {"depth": 1}}}
    assert size(anchor) == len('{"chainId":"é😀","jobs":{"a":{"depth":1}}}'.encode())
    assert size({"chainId": 'a"\n\x01'}) == len('{"chainId":"a\\"\\n\\u0001"}')


def test_limits_below_the_minimum_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 512"):
        fit({}, teamanchor.MIN_LIMIT - 1)
    assert fit({}, teamanchor.MIN_LIMIT) == {}


# --- properties ---------------------------------------------------------------------------

chain_ids = st.from_regex(r"\A[a-z0-9][-a-z0-9]{0,38}\Z")
names = st.sampled_from(["plan", "dev", "review", "ship", "fix"]) | st.text(max_size=80)
texts = st.text(max_size=400)
optional_texts = st.none() | texts
times = st.integers(0, 3599).map(lambda s: f"2024-05-01T12:{s // 60:02d}:{s % 60:02d}Z") | texts
# Small limits often, so that every stage of shrinking is reached.
limits = st.sampled_from([512, 600, 800]) | st.integers(512, 4096)
phases = st.sampled_from(["Pending", "Running", "Waiting", "Succeeded", "Failed", "Skipped"])


def update_strategy(chain_id: str, limit: int) -> st.SearchStrategy[Update]:
    def job_call(**kw: Any) -> Update:
        return lambda a: job_update(a, chain_id=chain_id, limit=limit, **kw)

    def hop_call(**kw: Any) -> Update:
        if kw["action"] == "spawned" and kw["child"] is None:
            kw["child"] = "child"
        return lambda a: hop_update(a, chain_id=chain_id, limit=limit, **kw)

    def complete_call(**kw: Any) -> Update:
        return lambda a: complete_update(a, chain_id=chain_id, limit=limit, **kw)

    jobs = st.builds(
        job_call,
        job=names,
        agent=names,
        depth=st.none() | st.integers(-2, 20),
        phase=phases | texts,
        reason=optional_texts,
        attempt=st.none() | st.integers(0, 5),
        at=times,
    )
    hops = st.builds(
        hop_call,
        parent=names,
        parent_agent=names,
        action=st.sampled_from(sorted(teamanchor.HOP_ACTIONS)),
        child=st.none() | names,
        child_agent=st.none() | names,
        reason=texts,
        message=st.text(max_size=1000),
        at=times,
    )
    completes = st.builds(complete_call, outcome=texts, last_job=names, at=times)
    return st.one_of(jobs, jobs, hops, hops, completes)


@st.composite
def histories(draw: st.DrawFn) -> tuple[str, int, list[Update]]:
    chain_id = draw(chain_ids)
    limit = draw(limits)
    updates = draw(st.lists(update_strategy(chain_id, limit), max_size=30))
    return chain_id, limit, updates


PROPERTY_SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(history=histories())
def test_any_history_fits_keeps_the_chain_and_replays_cleanly(
    history: tuple[str, int, list[Update]],
) -> None:
    chain_id, limit, updates = history
    anchor: Anchor = {}
    for update in updates:
        before = copy.deepcopy(anchor)
        result = update(anchor)
        assert anchor == before
        assert size(result) <= limit
        assert json.loads(json.dumps(result, ensure_ascii=False)) == result
        assert result["chainId"] == chain_id
        assert update(result) == result
        assert fit(result, limit) == result
        anchor = result


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=50),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
anchor_keys = st.sampled_from(
    [
        "chainId",
        "jobs",
        "handoffs",
        "escalations",
        "decisions",
        "complete",
        "truncated",
        "dropped",
        "x",
    ]
)


@PROPERTY_SETTINGS
@given(garbage=st.dictionaries(anchor_keys, json_values, max_size=9), data=st.data())
def test_any_garbage_anchor_is_read_and_fits(garbage: dict[str, Any], data: st.DataObject) -> None:
    limit = data.draw(limits)
    update = data.draw(update_strategy(CHAIN, limit))
    before = copy.deepcopy(garbage)
    result = update(garbage)
    assert garbage == before
    assert size(result) <= limit
    assert result["chainId"] == CHAIN
    assert update(result) == result


# Control characters take 6 bytes in JSON, quotes 2, these emoji 4: the costliest text.
heavy = st.text(alphabet=st.sampled_from(["\x01", '"', "😀", "界", "a"]), min_size=40, max_size=300)


@PROPERTY_SETTINGS
@given(values=st.lists(heavy, min_size=17, max_size=17), chain_id=chain_ids)
def test_the_costliest_strings_still_fit_the_smallest_limit(
    values: list[str], chain_id: str
) -> None:
    v = iter(values)
    parent, child = next(v), next(v)
    limit = teamanchor.MIN_LIMIT
    full_counts = {"jobs": 10**9, "handoffs": 10**9, "escalations": 10**9, "decisions": 10**9}
    updates: list[Update] = [
        lambda a: job_update(
            a,
            chain_id=chain_id,
            job=parent,
            agent=next(v),
            depth=9999,
            phase="Failed",
            reason=next(v),
            attempt=9999,
            at=next(v),
            limit=limit,
        ),
        lambda a: hop_update(
            a,
            chain_id=chain_id,
            parent=parent,
            parent_agent=next(v),
            action="spawned",
            child=child,
            child_agent=next(v),
            reason=next(v),
            message=next(v),
            at=next(v),
            limit=limit,
        ),
        lambda a: hop_update(
            a,
            chain_id=chain_id,
            parent=child,
            parent_agent=next(v),
            action="refused",
            child=parent,
            child_agent=next(v),
            reason=next(v),
            message=next(v),
            at=next(v),
            limit=limit,
        ),
        lambda a: complete_update(
            a, chain_id=chain_id, outcome=next(v), last_job=child, at=next(v), limit=limit
        ),
    ]
    anchor: Anchor = {"dropped": full_counts, "truncated": True}
    for update in updates:
        anchor = update(anchor)
        assert size(anchor) <= limit
        assert anchor["chainId"] == chain_id
    assert anchor["dropped"] == dict.fromkeys(full_counts, 999_999)
