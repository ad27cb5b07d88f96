"""Only a retried attempt's prompt carries the job's anchor (SPEC §6), on a real Redis.

Attempt 1 has never run, so it has no anchor to resume from. An anchor is the
object's (its uid): one an earlier AgentJob of the same name wrote (deleted and created
again) reaches no attempt of the new job.
"""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from agentchain.core import statuswriting
from agentchain.core.runtime import Runtime
from agentchain.hop.rules import chains
from agentchain.models.aiagent import AiAgent
from agentchain.prompts import prompting
from agentchain.prompts.rules.assembly import ANCHOR_HEADING
from agentchain.settings import Settings

NS = "team-a"
ANCHOR = {"task": "fix the flaky test", "status": "in_progress", "progress": "found it"}


@pytest.fixture
def rt(redis: Redis) -> Runtime:
    return Runtime.from_client(Settings(), redis)


async def _prompt(rt: Runtime, attempt: int) -> str:
    obj: statuswriting.Obj = {
        "metadata": {"name": "job-1", "namespace": NS, "uid": "uid-1"},
        "spec": {"agentRole": "coder", "prompt": "the task"},
    }
    agent = AiAgent.model_validate({"spec": {"triggerName": "coder"}})
    pos = chains.root_position("c1", "coder")
    return await prompting.build(rt, obj, statuswriting.parse(obj), agent, pos, [], attempt=attempt)


@pytest.mark.redis
async def test_a_first_attempt_ignores_an_anchor_under_its_name(rt: Runtime) -> None:
    await rt.anchors.put_job_anchor(NS, "job-1", "uid-1", ANCHOR)
    assert await _prompt(rt, 1) == "the task"


@pytest.mark.redis
@pytest.mark.parametrize("attempt", [2, 3])
async def test_a_retried_attempt_carries_the_anchor(rt: Runtime, attempt: int) -> None:
    await rt.anchors.put_job_anchor(NS, "job-1", "uid-1", ANCHOR)
    prompt = await _prompt(rt, attempt)
    assert ANCHOR_HEADING in prompt and "found it" in prompt
    assert prompt.endswith("the task")


@pytest.mark.redis
async def test_a_retry_without_an_anchor_gets_the_plain_prompt(rt: Runtime) -> None:
    assert await _prompt(rt, 2) == "the task"


@pytest.mark.redis
async def test_a_retry_ignores_the_anchor_of_an_earlier_object_of_its_name(rt: Runtime) -> None:
    await rt.anchors.put_job_anchor(NS, "job-1", "uid-of-the-deleted-one", ANCHOR)
    assert await _prompt(rt, 2) == "the task"
