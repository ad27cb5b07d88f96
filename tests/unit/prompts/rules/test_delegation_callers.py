"""Who may delegate to whom (issue 14): ``prompts.rules.delegation.check_caller``.

Aspects covered:
- a chain is the connected component of the ``next`` graph: upstream, downstream, through
  several steps, across github and manual triggers, and an agent with no links is alone;
- by default only the target's chain's agents may delegate to it, an outsider is refused
  with NotAllowedFrom and a message naming both agents;
- ``allowedFrom`` admits the named agents (and ``"*"`` every agent) besides the chain;
  ``allowChain: false`` leaves only ``allowedFrom``;
- the event the caller's job carries must pass the target's sender policy (association,
  bots), and manual or absent events need nothing; refusals are SenderPolicy;
- property: the decision depends only on membership, never on the order of the agents.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import AiAgentSpec
from agentchain.prompts.rules import delegation
from agentchain.prompts.rules.delegation import DelegationRefused


def agent(name: str, *nexts: str, source: str = "manual", **extra: Any) -> AiAgentSpec:
    triggers: list[dict[str, Any]] = [
        {
            "source": source,
            "events": ["issues.opened"] if source == "github" else [],
            "next": {"agentTriggerName": n},
        }
        for n in nexts
    ] or [{"source": "manual"}]
    return AiAgentSpec.model_validate({"triggerName": name, "eventTriggers": triggers, **extra})


# triage → developer → reviewer, a separate pair lone → helper, and an island.
TEAM = [
    agent("triage", "developer", source="github"),
    agent("developer", "reviewer"),
    agent("reviewer"),
    agent("lone", "helper"),
    agent("helper"),
    agent("island"),
]


def spec_of(name: str, agents: list[AiAgentSpec] = TEAM) -> AiAgentSpec:
    return next(a for a in agents if a.trigger_name == name)


def refusal(
    source: str,
    target: AiAgentSpec,
    agents: list[AiAgentSpec] = TEAM,
    event: JobEvent | None = None,
) -> str | None:
    try:
        delegation.check_caller(source, target, agents, event)
    except DelegationRefused as exc:
        return exc.reason
    return None


@pytest.mark.parametrize(
    ("name", "members"),
    [
        pytest.param("triage", {"triage", "developer", "reviewer"}, id="root"),
        pytest.param("developer", {"triage", "developer", "reviewer"}, id="middle"),
        pytest.param("reviewer", {"triage", "developer", "reviewer"}, id="last-two-steps-up"),
        pytest.param("helper", {"lone", "helper"}, id="other-chain"),
        pytest.param("island", {"island"}, id="no-links"),
        pytest.param("ghost", {"ghost"}, id="unknown-agent"),
    ],
)
def test_a_chain_is_the_connected_component_of_next(name: str, members: set[str]) -> None:
    assert delegation.chain_members(TEAM, name) == members


def test_links_through_an_agent_that_is_not_defined_still_connect() -> None:
    # Both point at the same (missing) agent: they are one chain by their configuration.
    agents = [agent("a", "missing"), agent("b", "missing")]
    assert delegation.chain_members(agents, "a") == {"a", "b", "missing"}


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        pytest.param("triage", "developer", None, id="downstream"),
        pytest.param("reviewer", "triage", None, id="upstream-two-steps"),
        pytest.param("developer", "developer", None, id="itself-is-in-its-chain"),
        pytest.param("lone", "developer", "NotAllowedFrom", id="another-chain"),
        pytest.param("island", "helper", "NotAllowedFrom", id="unlinked-caller"),
        pytest.param("developer", "island", "NotAllowedFrom", id="unlinked-target"),
        pytest.param("deleted-agent", "triage", "NotAllowedFrom", id="callers-agent-gone"),
    ],
)
def test_by_default_only_the_targets_chain_may_delegate(
    source: str, target: str, expected: str | None
) -> None:
    assert refusal(source, spec_of(target)) == expected


def test_the_refusal_names_both_agents() -> None:
    with pytest.raises(DelegationRefused) as info:
        delegation.check_caller("lone", spec_of("island"), TEAM, None)
    assert "'lone'" in info.value.message and "'island'" in info.value.message
    assert "allowedFrom" in info.value.message
    assert info.value.reason in delegation.FORBIDDEN_REASONS


@pytest.mark.parametrize(
    ("policy", "source", "expected"),
    [
        pytest.param({"allowedFrom": ["lone"]}, "lone", None, id="listed"),
        pytest.param({"allowedFrom": ["lone"]}, "helper", "NotAllowedFrom", id="not-listed"),
        pytest.param({"allowedFrom": ["lone"]}, "triage", None, id="chain-still-allowed"),
        pytest.param({"allowedFrom": ["*"]}, "helper", None, id="star"),
        pytest.param({"allowedFrom": ["*"]}, "never-defined", None, id="star-any-name"),
        pytest.param({"allowChain": False}, "triage", "NotAllowedFrom", id="chain-off"),
        pytest.param(
            {"allowChain": False, "allowedFrom": ["triage"]}, "triage", None, id="chain-off-listed"
        ),
        pytest.param(
            {"allowChain": False, "allowedFrom": ["triage"]},
            "reviewer",
            "NotAllowedFrom",
            id="chain-off-other-member",
        ),
        pytest.param({}, "lone", "NotAllowedFrom", id="empty-policy-is-the-default"),
    ],
)
def test_allowed_from_and_allow_chain(
    policy: dict[str, Any], source: str, expected: str | None
) -> None:
    target = agent("developer", "reviewer", delegation=policy)
    agents = [a for a in TEAM if a.trigger_name != "developer"] + [target]
    assert refusal(source, target, agents) == expected


def github(association: str | None, sender: str = "someone") -> JobEvent:
    return JobEvent(source="github", sender=sender, sender_association=association)


@pytest.mark.parametrize(
    ("event", "target_extra", "expected"),
    [
        pytest.param(None, {}, None, id="no-event"),
        pytest.param(JobEvent(source="manual"), {}, None, id="manual-event"),
        pytest.param(github("MEMBER"), {}, None, id="member"),
        pytest.param(github("owner"), {}, None, id="any-case"),
        pytest.param(github("NONE"), {}, "SenderPolicy", id="stranger"),
        pytest.param(github("CONTRIBUTOR"), {}, "SenderPolicy", id="contributor"),
        pytest.param(github(None), {}, "SenderPolicy", id="no-association-is-none"),
        pytest.param(
            github("NONE"),
            {"senderPolicy": {"allowedAssociations": ["NONE"]}},
            None,
            id="target-allows-strangers",
        ),
        pytest.param(github("MEMBER", "app[bot]"), {}, "SenderPolicy", id="bot"),
        pytest.param(
            github("NONE", "app[bot]"),
            {"senderPolicy": {"allowBots": True}},
            None,
            id="bot-allowed",
        ),
    ],
)
def test_the_carried_event_must_pass_the_targets_sender_policy(
    event: JobEvent | None, target_extra: dict[str, Any], expected: str | None
) -> None:
    target = agent("reviewer", **target_extra)
    agents = [a for a in TEAM if a.trigger_name != "reviewer"] + [target]
    assert refusal("developer", target, agents, event) == expected


def test_who_may_call_is_checked_before_the_event() -> None:
    assert refusal("lone", spec_of("island"), TEAM, github("NONE")) == "NotAllowedFrom"


@given(
    st.permutations(TEAM),
    st.sampled_from([a.trigger_name for a in TEAM]),
    st.sampled_from([a.trigger_name for a in TEAM]),
)
def test_the_order_of_agents_does_not_matter(
    agents: list[AiAgentSpec], source: str, target: str
) -> None:
    assert refusal(source, spec_of(target), agents) == refusal(source, spec_of(target))
