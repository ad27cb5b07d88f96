"""The root span a chain's root job writes when its trigger wrote none (``hop/tracing``).

Aspects covered:
- a job a ``/agentchain retry`` comment created (its ``retry-of`` annotation, under the
  operator's seal) names its chain's root after the command and the job it retries;
- the same annotation on a job the operator did not seal (applied by hand) is not
  believed: the root is its creation's;
- the root starts where the operator asked for the job (``created-ns``), not at the
  whole second of its ``creationTimestamp``.
"""

from __future__ import annotations

import copy
import datetime as dt

import pytest
from redis.asyncio import Redis

from agentchain import models
from agentchain.core.hopstate import Hop
from agentchain.core.runtime import Runtime
from agentchain.hop import tracing
from agentchain.hop.rules import chains
from agentchain.models.agentjob import AgentJobSpec
from agentchain.settings import Settings
from agentchain.store import sealing
from agentchain.traces.recording import Traces
from agentchain.traces.rules import spans
from agentchain.web.jobapi import bodies
from tests.unit.fakeapi import OPERATOR_KEY

NS = "team-a"
CHAIN = "c-retry"


def _runtime(redis: Redis) -> Runtime:
    rt = Runtime.from_client(Settings(operator_key=(OPERATOR_KEY,)), redis)
    rt.traces = Traces(redis, enabled=True)
    return rt


def _retry_job(rt: Runtime, *, seal: bool) -> dict[str, object]:
    spec = AgentJobSpec(agent_role="fixer", origin="github")
    body = bodies.agentjob_body(NS, "fixer-2", spec, chains.root_position(CHAIN, "fixer"), None)
    body["metadata"]["annotations"][models.RETRY_OF] = "fixer-1"
    obj = sealing.seal_job(rt.operator_keys, body) if seal else copy.deepcopy(body)
    # The API server's time: the whole second the operator asked for it in.
    asked = int(body["metadata"]["annotations"][models.CREATED_NS]) // 1_000_000_000
    created = dt.datetime.fromtimestamp(asked, dt.UTC).isoformat()
    obj["metadata"] |= {"creationTimestamp": created, "uid": "u1"}
    return obj


@pytest.mark.redis
async def test_a_retry_commands_job_names_its_chains_root(redis: Redis) -> None:
    rt = _runtime(redis)
    job = _retry_job(rt, seal=True)
    await tracing.root(Hop(rt, job), CHAIN)
    (root,) = await rt.traces.outbox.head(10)
    assert root.name == "command /agentchain retry"
    assert root.attributes["agentchain.command.retry_of"] == "fixer-1"
    assert root.span == spans.root_span_id(CHAIN) and root.parent is None
    asked = int(job["metadata"]["annotations"][models.CREATED_NS])  # type: ignore[index]
    assert root.start_ns == asked  # The operator's clock, not the whole second.
    assert spans.nanos(job["metadata"]["creationTimestamp"], 0) != asked  # type: ignore[index]


@pytest.mark.redis
async def test_an_unsealed_retry_of_is_not_believed(redis: Redis) -> None:
    rt = _runtime(redis)
    await tracing.root(Hop(rt, _retry_job(rt, seal=False)), CHAIN)
    (root,) = await rt.traces.outbox.head(10)
    assert root.name == "agentjob fixer-2 created"
    assert "agentchain.command.retry_of" not in root.attributes
