"""Who may reach which agent (issue 14), against the real API server and Redis.

Aspects covered:
* delegation: a job token may delegate only to agents that accept its agent (its own
  chain's agents by default, or ``spec.delegation.allowedFrom``); an outsider gets a
  403 JSON with reason NotAllowedFrom and nothing is created; a job carrying a GitHub
  event whose sender fails the target's sender policy gets 403 SenderPolicy;
* repository binding: a private repository's delivery starts only the agents bound to
  it, and the webhook's answer lists the unbound agent with the reason.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentchain.kube import resources
from agentchain.models.agentjob import AgentJobSpec, JobEvent
from agentchain.policy import chains
from agentchain.web import bodies
from e2e.controlplane.cluster import ClusterInfo
from e2e.webharness import (
    ADMIN,
    Client,
    agent_manifest,
    agentjobs,
    apply,
    drained,
    issue_opened,
    kube,
    served,
    signed,
)

__all__ = ["kube"]

PATH = "/webhooks/github"


@pytest.fixture
def team(kube: ClusterInfo, namespace: str) -> str:
    """lead → worker (one chain), an outsider, and ``guarded`` that only the outsider may call."""
    next_worker = [{"source": "manual", "next": {"agentTriggerName": "worker"}}]
    apply(kube, namespace, agent_manifest("lead", eventTriggers=next_worker))
    apply(kube, namespace, agent_manifest("worker"))
    apply(kube, namespace, agent_manifest("outsider"))
    apply(kube, namespace, agent_manifest("guarded", delegation={"allowedFrom": ["outsider"]}))
    return namespace


async def start(client: Client, namespace: str, agent: str) -> dict[str, Any]:
    body = {"namespace": namespace, "agentRole": agent, "prompt": "go", "name": f"{agent}-root"}
    response = await client.post("/api/jobs", json=body, headers=ADMIN)
    assert response.status == 201, await response.text()
    job: dict[str, Any] = await response.json()
    return job


async def delegate(client: Client, rt: Any, job: dict[str, Any], target: str) -> Any:
    token = await rt.tokens.ensure(job["namespace"], job["id"], job["chainId"], 600)
    return await client.post(
        "/api/jobs",
        json={"agentRole": target, "task": "help"},
        headers={"Authorization": f"Bearer {token}"},
    )


async def test_only_accepted_callers_may_delegate(kube: ClusterInfo, team: str) -> None:
    async with served(kube, team) as (client, rt):
        outsider = await start(client, team, "outsider")
        refused = await delegate(client, rt, outsider, "worker")
        assert refused.status == 403, await refused.text()
        answer = await refused.json()
        assert answer["error"] == "forbidden" and answer["reason"] == "NotAllowedFrom"
        assert "'outsider' may not delegate to 'worker'" in answer["detail"]
        assert {j["spec"]["agentRole"] for j in agentjobs(kube, team)} == {"outsider"}

        allowed = await delegate(client, rt, outsider, "guarded")
        assert allowed.status == 201, await allowed.text()
        lead = await start(client, team, "lead")
        same_chain = await delegate(client, rt, lead, "worker")
        assert same_chain.status == 201, await same_chain.text()
        not_listed = await delegate(client, rt, lead, "guarded")
        assert (await not_listed.json())["reason"] == "NotAllowedFrom"


async def test_a_strangers_event_does_not_travel_past_the_targets_sender_policy(
    kube: ClusterInfo, team: str
) -> None:
    async with served(kube, team) as (client, rt):
        # A lead job started by a stranger's issue (an agent that allowed strangers).
        event = JobEvent(source="github", name="issues", sender="eve", sender_association="NONE")
        spec = AgentJobSpec(agent_role="lead", prompt="", event=event, origin="github")
        position = chains.root_position("stranger0chain0000001", "lead")
        body = bodies.agentjob_body(team, "lead-stranger", spec, position, None)
        await resources.create(team, resources.AGENTJOBS, body)
        job = {"namespace": team, "id": "lead-stranger", "chainId": position.chain_id}
        refused = await delegate(client, rt, job, "worker")
        assert refused.status == 403, await refused.text()
        answer = await refused.json()
        assert answer["reason"] == "SenderPolicy"
        assert "author_association NONE not allowed" in answer["detail"]


def _agent(name: str, **spec: Any) -> str:
    triggers = [{"source": "github", "events": ["issues.opened"]}]
    return agent_manifest(name, eventTriggers=triggers, **spec)


async def test_private_repositories_reach_bound_agents_only(
    kube: ClusterInfo, namespace: str
) -> None:
    apply(kube, namespace, _agent("unbound"))
    apply(kube, namespace, _agent("bound", repositories=["ACME/*"]))
    apply(kube, namespace, _agent("elsewhere", repositories=["other/app"]))
    payload = issue_opened()
    payload["repository"] = {"full_name": "acme/app", "private": True}
    body, headers = signed(payload)
    async with served(kube, namespace, own_redis=True) as (client, rt):
        response = await client.post(PATH, data=body, headers=headers)
        assert response.status == 202, await response.text()
        answer = json.loads(await response.text())
        await drained(rt, namespace)
    assert [j["agent"] for j in answer["jobs"]] == ["bound"]
    reasons = {i["agent"]: i["reason"] for i in answer["ignored"]}
    assert reasons == {
        "unbound": (
            "repository binding: acme/app is private and the agent lists no spec.repositories"
        ),
        "elsewhere": "repository binding: acme/app is not in spec.repositories",
    }
    assert [j["spec"]["agentRole"] for j in agentjobs(kube, namespace)] == ["bound"]
