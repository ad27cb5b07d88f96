"""Learnings reach exactly one run of an agent per chain, across crashes (SPEC §5, seed 002).

Aspects covered, with ``prompts.prompting.build`` on a real Redis and the ConfigMap read
stubbed (the e2e test in ``e2e/test_learnings.py`` does the same on a real cluster):
- the first job of an agent in a chain gets the learnings at the top of its prompt, once;
- rebuilding that job's prompt (a restart after a crash) gets them again, so they are
  never lost; another job of the agent in the same chain gets none; another chain does;
- the claim is recorded before the ConfigMap is read: a crash at the
  ``learnings-claimed`` crashpoint leaves the claim, and the rebuild injects them;
- an agent without learnings claims nothing;
- ``faults.crashpoint`` SIGKILLs the process only when AGENTCHAIN_CRASHPOINT names it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import pytest
from redis.asyncio import Redis

from agentchain import faults
from agentchain.core import statuswriting
from agentchain.core.runtime import Runtime
from agentchain.hop.rules import chains
from agentchain.kube import workloads
from agentchain.models.aiagent import AiAgent
from agentchain.prompts import prompting
from agentchain.prompts.rules.assembly import LEARNINGS_HEADING
from agentchain.settings import Settings

NS = "team-a"
LESSON = "L-001 - Always rerun the flaky login test twice"


class Crashed(Exception):
    """Stands in for the SIGKILL a real crashpoint sends."""


@pytest.fixture
def rt(redis: Redis) -> Runtime:
    return Runtime.from_client(Settings(), redis)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """ConfigMap names read, in order; every ConfigMap holds LESSON."""
    seen: list[str] = []

    async def read_config_map(namespace: str, name: str) -> dict[str, str]:
        seen.append(name)
        return {"heuristics.md": LESSON}

    monkeypatch.setattr(workloads, "read_config_map", read_config_map)
    return seen


def _agent(learnings: bool = True) -> AiAgent:
    spec: dict[str, Any] = {"triggerName": "coder"}
    if learnings:
        spec["learnings"] = {"configMapName": "coder-learnings"}
    return AiAgent.model_validate({"spec": spec})


async def _prompt(rt: Runtime, name: str, chain_id: str, agent: AiAgent | None = None) -> str:
    obj: statuswriting.Obj = {
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
        "spec": {"agentRole": "coder", "prompt": f"task for {name}"},
    }
    pos = chains.root_position(chain_id, "coder")
    return await prompting.build(rt, obj, statuswriting.parse(obj), agent or _agent(), pos, [])


@pytest.mark.redis
async def test_first_run_in_a_chain_only(rt: Runtime, reads: list[str]) -> None:
    first = await _prompt(rt, "job-1", "c1")
    assert first.startswith(LEARNINGS_HEADING)
    assert first.count(LESSON) == 1 and first.endswith("task for job-1")
    assert await _prompt(rt, "job-1", "c1") == first  # Rebuilt after a crash: same prompt.
    assert await _prompt(rt, "job-2", "c1") == "task for job-2"
    assert (await _prompt(rt, "job-3", "c2")).count(LESSON) == 1
    assert await rt.chains.learnings_claimant(NS, "c1", "coder") == "job-1/uid-job-1"


@pytest.mark.redis
async def test_crash_after_the_claim_loses_nothing(
    rt: Runtime, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    armed = {"learnings-claimed"}

    def crashpoint(name: str) -> None:
        if name in armed:
            raise Crashed(name)

    monkeypatch.setattr(faults, "crashpoint", crashpoint)
    with pytest.raises(Crashed):
        await _prompt(rt, "job-1", "c1")
    # Recorded before anything was read or built.
    assert await rt.chains.learnings_claimant(NS, "c1", "coder") == "job-1/uid-job-1"
    assert reads == []
    armed.clear()  # The restarted operator.
    assert (await _prompt(rt, "job-1", "c1")).count(LESSON) == 1
    assert LESSON not in await _prompt(rt, "job-2", "c1")


@pytest.mark.redis
async def test_agent_without_learnings_claims_nothing(rt: Runtime, reads: list[str]) -> None:
    assert await _prompt(rt, "job-1", "c1", _agent(learnings=False)) == "task for job-1"
    assert await rt.chains.learnings_claimant(NS, "c1", "coder") is None
    assert reads == []


@pytest.mark.parametrize(("armed", "code"), [("learnings-claimed", -signal.SIGKILL), ("", 0)])
def test_crashpoint_kills_only_when_named(armed: str, code: int) -> None:
    env = {**os.environ, faults.CRASHPOINT_ENV: armed}
    script = "from agentchain import faults; faults.crashpoint('learnings-claimed')"
    done = subprocess.run([sys.executable, "-c", script], env=env, timeout=60, check=False)
    assert done.returncode == code
