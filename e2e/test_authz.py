"""Who may reach which agent (issue 14), against the real API server and Redis.

Aspects covered:
* delegation: a job token may delegate only to agents that accept its agent (its own
  chain's agents by default, or ``spec.delegation.allowedFrom``); an outsider gets a
  403 JSON with reason NotAllowedFrom and nothing is created; a job carrying a GitHub
  event whose sender fails the target's sender policy gets 403 SenderPolicy;
* repository binding: a private repository's delivery starts only the agents bound to
  it, and the webhook's answer lists the unbound agent with the reason;
* ``?wait=``: waiting requests listen to a watch instead of reading their job from the
  API server (its own request metric shows no reads while they wait), and one token
  holds at most ``MAX_WAITS_PER_JOB_TOKEN`` of them: one more is 429 TooManyWaits.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from agentchain.core.runtime import Runtime
from agentchain.hop.rules import chains
from agentchain.kube import resources
from agentchain.models.agentjob import AgentJobSpec, JobEvent
from agentchain.store import sealing
from agentchain.web.jobapi import bodies, waiting
from e2e import operating
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
OPENED = [{"source": "github", "events": ["issues.opened"]}]


# These tests run the API in-process and leave their jobs as they create them; the
# session operator (which serves every namespace) would run them and spawn children.
pytestmark = pytest.mark.usefixtures("operator_paused")


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


async def delegate(client: Client, rt: Runtime, job: dict[str, Any], target: str) -> Any:
    uid = f"uid-{job['id']}"
    token = await rt.tokens.issue(job["namespace"], job["id"], uid, job["chainId"], 600)
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
        # As the webhook makes it: under the operator's seals (its event vouched for).
        await resources.create(team, resources.AGENTJOBS, sealing.seal_job(rt.operator_keys, body))
        job = {"namespace": team, "id": "lead-stranger", "chainId": position.chain_id}
        refused = await delegate(client, rt, job, "worker")
        assert refused.status == 403, await refused.text()
        answer = await refused.json()
        assert answer["reason"] == "SenderPolicy"
        assert "author_association NONE not allowed" in answer["detail"]


async def test_private_repositories_reach_bound_agents_only(
    kube: ClusterInfo, namespace: str
) -> None:
    apply(kube, namespace, agent_manifest("unbound", eventTriggers=OPENED))
    apply(kube, namespace, agent_manifest("bound", eventTriggers=OPENED, repositories=["ACME/*"]))
    apply(
        kube,
        namespace,
        agent_manifest("elsewhere", eventTriggers=OPENED, repositories=["other/app"]),
    )
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


async def _settled_agentjob_gets(kube: ClusterInfo, timeout: float = 15.0) -> int:
    """The read count once it has not moved for a second (the waits' first reads done)."""
    deadline = time.monotonic() + timeout
    last = await asyncio.to_thread(_agentjob_gets, kube)
    while time.monotonic() < deadline:
        await asyncio.sleep(1)
        now = await asyncio.to_thread(_agentjob_gets, kube)
        if now == last:
            return now
        last = now
    return last


def _agentjob_gets(kube: ClusterInfo) -> int:
    """How many single-AgentJob GETs the API server has answered (its own metric)."""
    total = 0
    for line in kube.kubectl("get", "--raw", "/metrics").stdout.splitlines():
        if line.startswith("apiserver_request_total{") and 'resource="agentjobs"' in line:
            if 'verb="GET"' in line and 'scope="resource"' in line and 'subresource=""' in line:
                total += int(float(line.rsplit(" ", 1)[1]))
    return total


async def test_waits_share_a_watch_and_are_capped_per_token(kube: ClusterInfo, team: str) -> None:
    async with served(kube, team) as (client, rt):
        lead = await start(client, team, "lead")
        token = await rt.tokens.issue(team, lead["id"], f"uid-{lead['id']}", lead["chainId"], 600)
        headers = {"Authorization": f"Bearer {token}"}
        body = {"agentRole": "worker", "task": "t"}

        def wait_once() -> asyncio.Task[Any]:
            return asyncio.ensure_future(
                client.post("/api/jobs?wait=120", json=body, headers=headers)
            )

        waits = [wait_once() for _ in range(waiting.MAX_WAITS_PER_JOB_TOKEN)]
        while len(agentjobs(kube, team)) < 2:  # the lead and the one job the waits share
            await asyncio.sleep(0.2)
        # Every wait reads its job once, then listens to the watch: settle first.
        before = await _settled_agentjob_gets(kube)
        await asyncio.to_thread(
            operating.stays,
            lambda: _agentjob_gets(kube) - before <= len(waits) + 2,
            seconds=5,
            interval=1,
            what="few AgentJob reads while waiting",
        )
        after = await asyncio.to_thread(_agentjob_gets, kube)
        # Polling read each job twice a second per waiter: 40 reads here. A wait whose
        # request a loaded machine served late still makes its one first read.
        reads = after - before
        assert reads <= len(waits) + 2, f"{reads} AgentJob reads while waiting"
        over = await client.post("/api/jobs?wait=120", json=body, headers=headers)
        assert over.status == 429, await over.text()
        assert (await over.json())["reason"] == "TooManyWaits"
        assert not any(w.done() for w in waits)
        name = next(
            j["metadata"]["name"]
            for j in agentjobs(kube, team)
            if j["spec"]["agentRole"] == "worker"
        )
        status = json.dumps({"status": {"phase": "Succeeded", "exitCode": 0, "result": "ok"}})
        await asyncio.to_thread(
            kube.kubectl,
            "-n",
            team,
            "patch",
            "agentjob",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            status,
        )
        answers = [await (await w).json() for w in waits]
        assert all(a["terminal"] and a["status"] == "completed" for a in answers), answers
        # The slots are free again.
        again = await client.post("/api/jobs?wait=1", json=body, headers=headers)
        assert again.status == 200 and (await again.json())["terminal"] is True


def _listed_agentjobs(kube: ClusterInfo) -> int:
    """How many AgentJobs the API server's lists have returned (cache and storage)."""
    total = 0
    for line in kube.kubectl("get", "--raw", "/metrics").stdout.splitlines():
        if (
            line.startswith(
                ("apiserver_cache_list_returned_objects_total{", "apiserver_storage_list_returned")
            )
            and 'resource="agentjobs"' in line
        ):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


async def test_a_job_tokens_listing_reads_its_own_chain_only(kube: ClusterInfo, team: str) -> None:
    async with served(kube, team) as (client, rt):
        others = [
            {"namespace": team, "agentRole": "worker", "prompt": "p", "name": f"other-{n}"}
            for n in range(20)
        ]
        for body in others:
            assert (await client.post("/api/jobs", json=body, headers=ADMIN)).status == 201
        mine = await start(client, team, "lead")
        token = await rt.tokens.issue(team, mine["id"], f"uid-{mine['id']}", mine["chainId"], 600)
        headers = {"Authorization": f"Bearer {token}"}
        # Two requests, each reading the one job of its chain; not the namespace's 21. The
        # API server's counters are cluster-wide, so a list made meanwhile by someone else
        # (the namespace controller emptying an earlier test's namespace) adds to them:
        # the pair is measured up to three times, and reading the namespace would show 21
        # more every time.
        read: list[int] = []
        for _ in range(3):
            before = await asyncio.to_thread(_listed_agentjobs, kube)
            for path in ("/api/jobs", f"/api/chains/{team}/{mine['chainId']}"):
                response = await client.get(path, headers=headers)
                assert response.status == 200, await response.text()
            read.append(await asyncio.to_thread(_listed_agentjobs, kube) - before)
            if read[-1] <= 2:
                break
        assert min(read) <= 2, f"{read} AgentJobs read for one chain"
        listed = await (await client.get("/api/jobs", headers=headers)).json()
        assert [j["id"] for j in listed["items"]] == [mine["id"]]
        by_name = await client.get("/api/jobs/other-7", headers=ADMIN)
        assert (await by_name.json())["id"] == "other-7"
