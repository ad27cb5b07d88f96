"""The namespace's cap on workspace volumes is exact, against the in-process API server.

``max_workspaces_per_namespace`` is counted from a list of the namespace's claims and
then one is created: two chains starting at once both counted below the cap and both
created one (the issue-18 note called it a soft cap).  Aspects covered:
- two chains starting at once with one place left: one claim, the other job refused
  ``WorkspaceLimitReached``;
- a chain whose claim exists already is never refused, even at the cap.
"""

from __future__ import annotations

import asyncio
import copy

import pytest
from redis.asyncio import Redis

from agentchain.core.hopstate import Hop
from agentchain.core.runtime import Runtime
from agentchain.models.aiagent import Workspace
from agentchain.models.conditions import Reason
from agentchain.workspaces import attaching
from agentchain.workspaces.rules import jobmounts
from tests.unit.fakeapi import FakeApi, Obj, Write
from tests.unit.hop.test_hop_write_order import NS, SETTINGS, api, kubeconfig

__all__ = ["api", "kubeconfig"]  # Fixtures.
CAPPED = SETTINGS.model_copy(update={"max_workspaces_per_namespace": 1})


def root(api: FakeApi, name: str) -> Obj:
    job = {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"agentRole": "coder", "prompt": "go"},
    }
    return copy.deepcopy(api.put("agentjobs", job))


def chain(chain_id: str) -> jobmounts.ChainWorkspace:
    found = jobmounts.resolve(
        Workspace(repository="octo/app"), None, chain_id, "https://git.example"
    )
    assert isinstance(found, jobmounts.ChainWorkspace)
    return found


def claims(api: FakeApi) -> list[str]:
    return [c["metadata"]["name"] for c in api.of("persistentvolumeclaims")]


@pytest.mark.redis
async def test_two_chains_never_both_take_the_last_place(api: FakeApi, redis: Redis) -> None:
    rt = Runtime.from_client(CAPPED, redis)
    hops = [Hop(rt, root(api, f"root-{i}")) for i in range(2)]

    async def slow_creates(write: Write) -> None:
        if write.kind == "persistentvolumeclaims":
            await asyncio.sleep(0.2)  # Time for the other chain to count meanwhile.

    api.before_write = slow_creates
    answers = await asyncio.gather(
        *(attaching._ensure_claim(hop, chain(f"c{i}")) for i, hop in enumerate(hops))
    )
    assert len(claims(api)) == 1
    refused = [a for a in answers if a is not None]
    assert [r.reason for r in refused] == [Reason.WORKSPACE_LIMIT_REACHED]


@pytest.mark.redis
async def test_a_chain_with_its_claim_is_never_refused(api: FakeApi, redis: Redis) -> None:
    rt = Runtime.from_client(CAPPED, redis)
    hop = Hop(rt, root(api, "root-0"))
    assert await attaching._ensure_claim(hop, chain("c0")) is None
    assert await attaching._ensure_claim(hop, chain("c0")) is None  # At the cap: its own.
    assert claims(api) == [jobmounts.claim_name("c0")]
