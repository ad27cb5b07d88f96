"""The chain tree the dashboard draws, from job records alone (issue 19).

Aspects covered:
* rows: depth-first from the root, children under their parent, a job whose parent
  is unknown shown as a root, never dropped; a parent/child tie on creation time is
  ordered by depth;
* nodes: agent, phase as state, depth, exit code, duration; a refusal's record shows
  as ``refused`` with its reason; skipped and new phases pass through;
* edges: from each parent's ``next`` (action, reason, an unmet condition); endings
  (stopped, none) stay on the job they ended at;
* a completed chain whose final step records no agent, a chain refused at its end;
* a chain whose AgentJobs were deleted but whose Redis record remains: its hops still
  draw nodes and edges, marked deleted;
* totals: jobs by state, the wall-time bounds and the summed run time; the usage the
  agents reported, summed, in the currency of the first agent's budget (none reported:
  no usage, not zeros).
"""

from __future__ import annotations

from typing import Any

from agentchain import models
from agentchain.models.aiagent import AiAgentSpec
from agentchain.store.chainrecords import ChainRecord
from agentchain.web import serializers
from agentchain.web.dashboard import chainview

Obj = dict[str, Any]


def job(
    name: str,
    agent: str,
    depth: int,
    parent: str | None = None,
    *,
    phase: str = "Succeeded",
    next_: list[Obj] | None = None,
    created: str = "2026-01-01T00:00:00Z",
    **status: Any,
) -> Obj:
    annotations = {models.CHAIN_ID: "c1", models.CHAIN_DEPTH: str(depth)}
    if parent:
        annotations[models.PARENT_JOB] = parent
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "annotations": annotations,
            "creationTimestamp": created,
        },
        "spec": {"agentRole": agent},
        "status": {"phase": phase, "next": next_ or [], **status},
    }


def spawned(child: str, agent: str) -> Obj:
    return {"action": "spawned", "agent": agent, "child": child, "reason": "ChildSpawned"}


def seed_chain() -> list[Obj]:
    # Same creation second for all three: the tie is broken by depth.
    return [
        job("review", "ai-reviewer", 2, "dev", phase="Running", startTime="2026-01-01T00:00:05Z"),
        job(
            "dev",
            "ai-developer",
            1,
            "triage",
            next_=[spawned("review", "ai-reviewer")],
            exitCode=0,
            startTime="2026-01-01T00:00:02Z",
            completionTime="2026-01-01T00:00:04Z",
        ),
        job(
            "triage",
            "ai-triage",
            0,
            next_=[spawned("dev", "ai-developer")],
            exitCode=0,
            startTime="2026-01-01T00:00:00Z",
            completionTime="2026-01-01T00:00:01.5Z",
        ),
    ]


def test_a_running_chain_is_three_nodes_in_a_line() -> None:
    out = chainview.layout("c1", "team-a", seed_chain(), None)
    assert out["rows"] == [
        {"id": "triage", "level": 0},
        {"id": "dev", "level": 1},
        {"id": "review", "level": 2},
    ]
    nodes = out["nodes"]
    assert [nodes[r["id"]]["state"] for r in out["rows"]] == ["succeeded", "succeeded", "running"]
    assert nodes["dev"]["durationSeconds"] == 2.0 and nodes["triage"]["durationSeconds"] == 1.5
    assert nodes["dev"]["depth"] == 1 and nodes["dev"]["exitCode"] == 0
    assert nodes["review"]["parent"] == "dev" and nodes["review"]["durationSeconds"] is None
    assert [(e["from"], e["to"], e["action"]) for e in out["edges"]] == [
        ("triage", "dev", "spawned"),
        ("dev", "review", "spawned"),
    ]
    assert out["complete"] is False
    assert out["totals"]["byState"] == {"running": 1, "succeeded": 2}
    assert out["totals"]["startedAt"] == "2026-01-01T00:00:00Z"
    assert out["totals"]["runSeconds"] == 3.5


def test_a_chain_refused_at_its_end() -> None:
    loop = "Loop detected: ai-triage → ai-developer → ai-triage"
    jobs = [
        job(
            "triage",
            "ai-triage",
            0,
            next_=[spawned("dev", "ai-developer")],
        ),
        job(
            "dev",
            "ai-developer",
            1,
            "triage",
            next_=[
                {
                    "action": "refused",
                    "agent": "ai-triage",
                    "child": "again",
                    "reason": "LoopDetected",
                    "message": loop,
                }
            ],
        ),
        job("again", "ai-triage", 2, "dev", phase="Failed", reason="LoopDetected", message=loop),
    ]
    jobs[2]["metadata"]["annotations"][chainview.DISPOSITION] = "refused:LoopDetected"
    record = ChainRecord("c1", complete=True, outcome="failed", last_job="again")
    out = chainview.layout("c1", "team-a", jobs, record)
    refused = out["nodes"]["again"]
    assert refused["state"] == "refused" and refused["reason"] == "LoopDetected"
    edge = next(e for e in out["edges"] if e["to"] == "again")
    assert edge["action"] == "refused" and edge["reason"] == "LoopDetected"
    assert out["complete"] is True and out["outcome"] == "failed"
    assert [r["level"] for r in out["rows"]] == [0, 1, 2]


def test_endings_stay_on_their_job_and_unmet_conditions_are_named() -> None:
    stop = {
        "action": "stopped",
        "agent": "ai-developer",
        "reason": "ChainStopped",
        "message": "Condition on-success not met (ai-triage failed); failurePolicy stop ends it.",
    }
    final = {"action": "none", "message": "Chain complete: ai-triage has no next step."}
    out = chainview.layout("c1", "team-a", [job("t", "ai-triage", 0, next_=[stop, final])], None)
    endings = out["nodes"]["t"]["endings"]
    assert [e["action"] for e in endings] == ["stopped", "none"]
    assert endings[0]["condition"] == "on-success not met" and endings[1]["condition"] is None
    assert endings[1]["agent"] is None  # The final step has no agent: no error.
    assert out["edges"] == []


def test_skipped_and_new_phases_pass_through() -> None:
    jobs = [
        job("a", "x", 0, next_=[{"action": "skipped", "child": "b", "reason": "Skipped"}]),
        job("b", "y", 1, "a", phase="Skipped"),
        job("c", "z", 0, phase="AwaitingApproval"),
    ]
    out = chainview.layout("c1", "team-a", jobs, None)
    assert (
        out["nodes"]["b"]["state"] == "skipped" and out["nodes"]["c"]["state"] == "awaitingapproval"
    )


def test_a_job_whose_parent_is_unknown_is_a_root() -> None:
    out = chainview.layout("c1", "team-a", [job("orphan", "x", 3, "gone")], None)
    assert out["rows"] == [{"id": "orphan", "level": 0}]


def test_a_chain_whose_jobs_were_deleted_draws_from_its_record() -> None:
    hops = [
        {
            "jobName": "t",
            "agent": "ai-triage",
            "phase": "Succeeded",
            "decision": "spawned",
            "detail": "d",
        },
        {
            "jobName": "d",
            "agent": "ai-developer",
            "phase": "Failed",
            "decision": "stopped",
            "detail": "x",
        },
    ]
    record = ChainRecord("c1", hops=hops, complete=True, outcome="failed", last_job="d")
    out = chainview.layout("c1", "team-a", [], record)
    assert out["rows"] == [{"id": "t", "level": 0}, {"id": "d", "level": 1}]
    assert out["nodes"]["d"]["deleted"] and out["nodes"]["d"]["state"] == "failed"
    assert out["nodes"]["d"]["agent"] == "ai-developer"
    assert out["edges"] == [chainview.edge_of("t", {"action": "spawned", "child": "d"})]
    assert out["totals"]["jobs"] == 2 and out["totals"]["startedAt"] is None


def test_a_cyclic_record_cannot_loop() -> None:
    hops = [
        {"jobName": "a", "phase": "Failed", "decision": "spawned", "detail": "b"},
        {"jobName": "b", "phase": "Failed", "decision": "spawned", "detail": "a"},
    ]
    out = chainview.layout("c1", "team-a", [], ChainRecord("c1", hops=hops))
    assert out["rows"] == []  # Both have a parent: neither is a root, nothing loops.


def test_edges_name_the_configured_condition_of_the_parents_trigger() -> None:
    triage = AiAgentSpec.model_validate(
        {
            "triggerName": "ai-triage",
            "eventTriggers": [
                {
                    "source": "github",
                    "events": ["issues.opened"],
                    "next": {"agentTriggerName": "ai-developer", "condition": "always"},
                },
                {
                    "source": "manual",
                    "next": {"agentTriggerName": "ai-developer", "failurePolicy": "skip"},
                },
            ],
        }
    )
    jobs = seed_chain()
    agents = {"ai-triage": triage}
    manual = chainview.layout("c1", "team-a", jobs, None, agents)
    assert [e["condition"] for e in manual["edges"]] == ["on-success, skip", None]
    jobs[2]["spec"].update(
        origin="github", event={"source": "github", "name": "issues", "action": "opened"}
    )
    github = chainview.layout("c1", "team-a", jobs, None, agents)
    assert github["edges"][0]["condition"] == "always, stop"


def test_totals_sum_the_reported_usage_in_the_first_agents_currency() -> None:
    jobs = [
        job("a", "ai-triage", 0, chainPath=["ai-triage"]),
        job("b", "ai-dev", 1, "a", chainPath=["ai-triage", "ai-dev"], usage={"tokens": 7}),
        job("c", "ai-rev", 2, "b", chainPath=["ai-triage"], usage={"tokens": 3, "cost": 0.1}),
    ]
    jobs[0]["status"]["usage"] = {"tokens": 5, "cost": 0.2}
    budget = {"triggerName": "ai-triage", "budget": {"currency": "EUR"}}
    agents = {"ai-triage": AiAgentSpec.model_validate(budget)}
    totals = chainview.layout("c1", "team-a", jobs, None, agents)["totals"]
    assert totals["usage"] == {"tokens": 15, "cost": 0.3, "currency": "EUR", "reportedBy": 3}
    assert chainview.layout("c1", "team-a", jobs, None)["totals"]["usage"]["currency"] == "USD"
    silent = [job("a", "ai-triage", 0), job("b", "ai-dev", 1, "a")]
    assert chainview.layout("c1", "team-a", silent, None)["totals"]["usage"] is None


def test_a_jobs_usage_is_shown_only_when_reported() -> None:
    assert serializers.usage_view(None, "EUR") is None
    assert serializers.usage_view("junk", None) is None
    view = serializers.usage_view({"tokens": 12, "cost": 1.5}, None)
    assert view == {"tokens": 12, "cost": 1.5, "currency": "USD"}
    odd = serializers.usage_view({"tokens": "12", "cost": None}, "EUR")
    assert odd == {"tokens": 0, "cost": 0.0, "currency": "EUR"}


def test_totals_sum_the_token_split_of_the_jobs_that_report_one() -> None:
    jobs = [
        job("a", "ai-triage", 0, usage={"tokens": 10, "inputTokens": 8, "outputTokens": 2}),
        job("b", "ai-dev", 1, "a", chainPath=["ai-triage", "ai-dev"], usage={"tokens": 7}),
        job("c", "ai-rev", 2, "b", chainPath=["ai-triage"], usage={"tokens": 5, "outputTokens": 5}),
    ]
    usage = chainview.layout("c1", "team-a", jobs, None)["totals"]["usage"]
    assert usage["tokens"] == 22
    assert (usage["inputTokens"], usage["outputTokens"], usage["splitBy"]) == (8, 7, 2)
    unsplit = [job("a", "ai-triage", 0, usage={"tokens": 10})]
    assert "inputTokens" not in chainview.layout("c1", "team-a", unsplit, None)["totals"]["usage"]


def _root(name: str, chain: str, event: dict[str, Any] | None, phase: str = "Running") -> Obj:
    return {
        "metadata": {"name": name, "labels": {"labrats.work/chain-id": chain}},
        "spec": {"agentRole": "dev", "event": event},
        "status": {"phase": phase},
    }


class TestLineage:
    """The chain page names the chain a round continues, and a chain's rounds, from
    events the operator vouches for only."""

    def test_a_round_names_the_chain_it_continues(self) -> None:
        root = _root("r", "round-1", {"continues": "c1", "round": 2})
        assert chainview.lineage("round-1", [(root, True)], []) == {
            "continues": {"chainId": "c1", "round": 2},
            "rounds": [],
        }
        assert chainview.lineage("round-1", [(root, False)], [])["continues"] is None

    def test_a_chain_lists_its_rounds_in_order(self) -> None:
        two = _root("b", "round-2", {"continues": "c1", "round": 2}, "Succeeded")
        one = _root("a", "round-1", {"continues": "c1", "round": 1}, "Cancelled")
        forged = _root("f", "round-x", {"continues": "c1", "round": 3})
        other = _root("o", "round-y", {"continues": "c2", "round": 1})
        found = chainview.lineage(
            "c1", [], [(two, True), (one, True), (forged, False), (other, True)]
        )
        assert found["continues"] is None
        assert [(r["chainId"], r["round"]) for r in found["rounds"]] == [
            ("round-1", 1),
            ("round-2", 2),
        ]
