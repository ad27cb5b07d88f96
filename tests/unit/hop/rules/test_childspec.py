"""The chain child's AgentJob (``agentchain.hop.rules.childspec.build_child``).

Aspects covered:
- the whole manifest of a spawned child, asserted as one literal: name, namespace,
  chain labels and annotations (with the parent), ``origin: chain``, the parent's type
  and event carried, the ``<chain-context>`` block as given;
- a Skipped and a refused child carry their disposition (``skipped`` or
  ``refused:<reason>``) and its message, nothing else differs;
- a parent without type or event gives a child without them (no nulls);
- a child of an issue's job carries that issue's `labrats.work/github-issue` label;
- the body is a pure function: the same inputs give the same body (hypothesis), and
  nothing of the parent's prompt, dependencies or memory scope is inherited.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentchain.core.rules import naming
from agentchain.hop.rules import chains, childspec
from agentchain.models.agentjob import AgentJobSpec
from agentchain.models.conditions import Reason

POSITION = chains.ChainPosition(chain_id="c0ffee", depth=1, path=("triage", "developer"))
PLAN = chains.ChildPlan("fix-1-developer-1a2b3c", "developer", "fix-1", POSITION, "tail", None)
PARENT = AgentJobSpec.model_validate(
    {
        "agentRole": "triage",
        "type": "implement-issue",
        "prompt": "the parent's own task",
        "origin": "github",
        "dependsOn": ["other"],
        "memoryScope": "all",
        "event": {"source": "github", "name": "issues", "action": "opened", "number": 7},
    }
)
BLOCK = "<chain-context>\nthe parent's output\n</chain-context>\n\n"


def _child(decision: childspec.Child, parent: AgentJobSpec = PARENT) -> dict[str, Any]:
    return childspec.build_child("team-a", parent, decision, BLOCK)


def test_the_whole_manifest_of_a_spawned_child() -> None:
    spawn = chains.Spawn(PLAN, notify=False, message="triage succeeded → running developer.")
    assert _child(spawn) == {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {
            "name": "fix-1-developer-1a2b3c",
            "namespace": "team-a",
            "labels": {"labrats.work/chain-id": "c0ffee", "labrats.work/agent": "developer"},
            "annotations": {
                "labrats.work/chain-id": "c0ffee",
                "labrats.work/chain-depth": "1",
                "labrats.work/chain-path": '["triage","developer"]',
                "labrats.work/parent-job": "fix-1",
            },
        },
        "spec": {
            "agentRole": "developer",
            "type": "implement-issue",
            "origin": "chain",
            "event": {
                "source": "github",
                "name": "issues",
                "action": "opened",
                "number": 7,
                "labels": [],
            },
            "chainContext": BLOCK,
        },
    }


def test_skipped_and_refused_children_carry_their_disposition() -> None:
    spawned = _child(chains.Spawn(PLAN, notify=True, message="m"))
    skipped = _child(chains.Skip(PLAN, message="condition not met; skipped"))
    refused = _child(chains.Refuse(PLAN, Reason.LOOP_DETECTED, "Loop detected: a → b → a"))
    assert skipped["metadata"]["annotations"] == {
        **spawned["metadata"]["annotations"],
        "labrats.work/disposition": "skipped",
        "labrats.work/disposition-message": "condition not met; skipped",
    }
    assert refused["metadata"]["annotations"] == {
        **spawned["metadata"]["annotations"],
        "labrats.work/disposition": "refused:LoopDetected",
        "labrats.work/disposition-message": "Loop detected: a → b → a",
    }
    for record in (skipped, refused):
        assert record["spec"] == spawned["spec"]
        assert record["metadata"]["labels"] == spawned["metadata"]["labels"]


def test_a_parent_without_type_or_event_gives_none_to_its_child() -> None:
    bare = AgentJobSpec.model_validate({"agentRole": "triage"})
    spec = _child(chains.Spawn(PLAN, notify=False, message="m"), bare)["spec"]
    assert spec == {"agentRole": "developer", "origin": "chain", "chainContext": BLOCK}


@given(
    agent=st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
    message=st.text(max_size=200),
    context=st.text(max_size=200),
)
def test_the_body_is_a_function_of_its_inputs(agent: str, message: str, context: str) -> None:
    plan = chains.ChildPlan("child", agent, "fix-1", POSITION, "head", None)
    decision = chains.Skip(plan, message=message)
    first = childspec.build_child("ns", PARENT, decision, context)
    assert first == childspec.build_child("ns", PARENT, decision, context)
    assert first["spec"]["chainContext"] == context
    assert first["metadata"]["annotations"]["labrats.work/disposition-message"] == message
    assert not {"prompt", "dependsOn", "memoryScope", "delegation"} & set(first["spec"])


def test_a_child_of_an_issue_carries_its_issue_label() -> None:
    """Comment commands list an issue's jobs by this label, children included."""
    event = {"source": "github", "repository": "octo/repo", "number": 7}
    parent = AgentJobSpec.model_validate({"agentRole": "triage", "event": event})
    spawn = chains.Spawn(PLAN, notify=False, message="")
    labels = _child(spawn, parent)["metadata"]["labels"]
    assert labels["labrats.work/github-issue"] == naming.issue_label("octo/repo", 7)
    other = naming.issue_label("octo/repo", 8), naming.issue_label("octo/other", 7)
    assert labels["labrats.work/github-issue"] not in other
    assert "labrats.work/github-issue" not in _child(spawn)["metadata"]["labels"]  # No repo.
