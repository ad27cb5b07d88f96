"""A launched job's token carries the trust mark of its chain's sender, on a real Redis
and the in-process API server (``hop/launching.py``, ``prompts/rules/storetrust.py``).

Aspects covered: a child spawned in a chain a GitHub ``NONE`` sender started writes to
the store as that sender (its entries reach only agents that admit it); a child of a
chain no GitHub event started writes as trusted.
"""

from __future__ import annotations

import base64

import pytest
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.hop.rules.jobspec import TOKEN_SECRET_KEY
from agentchain.models.agentjob import JobEvent
from agentchain.prompts.rules import storetrust
from tests.unit.fakeapi import FakeApi, sealed
from tests.unit.hop.test_hop_write_order import SETTINGS, api, hop, kubeconfig, seed

__all__ = ["api", "kubeconfig"]  # Fixtures.
pytestmark = pytest.mark.redis
STRANGER = {
    "source": "github",
    "name": "issues",
    "action": "opened",
    "repository": "o/r",
    "number": 1,
    "subject": "issue",
    "sender": "drive-by",
    "senderAssociation": "NONE",
}


async def _child_trust(api: FakeApi, redis: Redis) -> str:
    await hop(redis)
    (secret,) = api.of("secrets")
    data = secret.get("stringData") or {
        k: base64.b64decode(v).decode() for k, v in secret["data"].items()
    }
    scope = await Runtime.from_client(SETTINGS, redis).tokens.resolve(data[TOKEN_SECRET_KEY])
    assert scope is not None
    return scope.trust


@pytest.mark.parametrize(
    ("event", "mark"),
    [
        (STRANGER, storetrust.mark_of(JobEvent.model_validate(STRANGER))),
        (None, storetrust.TRUSTED),
    ],
)
async def test_a_child_writes_as_its_chains_sender(
    api: FakeApi, redis: Redis, event: dict[str, object] | None, mark: str
) -> None:
    seed(api)
    if event is not None:  # As the webhook made it: under the operator's seals.
        parent = api.objects[("agentjobs", "p")]
        parent["spec"]["event"] = event
        sealed(parent)
    assert await _child_trust(api, redis) == mark
