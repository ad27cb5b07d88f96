"""A job whose decision ends its branch completes its chain only as the chain's last open job.

Against an in-process API server and a real Redis, through the resync's entry
(``hopping.progress``) on jobs whose end status is written and whose ``next`` is not.
Aspects covered:
- a delegated job that ended while the job that delegated to it still runs: its
  ``status.next`` is ``none``/``BranchEnded`` with ``branchEnded``, no ``chainComplete``,
  and the chain's record is not complete; then the caller's end completes the chain on
  the caller, once, and a second resync of either writes nothing;
- an AgentJob made by hand with the chain's label and annotations but not under the
  operator's seal does not hold the chain open;
- a chain step's parent whose close a crash cut short (ended, no ``status.next``) does
  not hold open the chain of the child it made: the child's end completes it;
- nor does a grandparent cut short the same way (the SIGKILL chaos run found it: its
  replay decides ``Spawn``, so it never completes the chain itself).
"""

from __future__ import annotations

import json

import pytest
from redis.asyncio import Redis

from agentchain import models
from agentchain.core.rules import naming
from agentchain.core.runtime import Runtime
from agentchain.hop import resync
from tests.unit.fakeapi import FakeApi, Obj, sealed
from tests.unit.hop.test_hop_write_order import SETTINGS, agent

# The in-process API server and its kubeconfig, as fixtures (re-exported by name).
from tests.unit.hop.test_hop_write_order import api as api
from tests.unit.hop.test_hop_write_order import kubeconfig as kubeconfig

NS = "team-a"
CHAIN = "c0ffee"


def _job(name: str, path: list[str], phase: str, parent: str | None = None) -> Obj:
    annotations = {
        models.CHAIN_ID: CHAIN,
        models.CHAIN_DEPTH: str(len(path) - 1),
        models.CHAIN_PATH: json.dumps(path),
    }
    if parent is not None:
        annotations[models.PARENT_JOB] = parent
    status: Obj = {"phase": phase, "chainId": CHAIN, "chainDepth": len(path) - 1}
    if phase == "Succeeded":
        status |= {"reason": "Succeeded", "exitCode": 0, "completionTime": "2026-11-27T00:00:00Z"}
    return {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {models.CHAIN_ID: CHAIN},
            "annotations": annotations,
        },
        "spec": {"agentRole": path[-1], "prompt": "go", "origin": "manual"},
        "status": status,
    }


def _status(api: FakeApi, name: str) -> Obj:
    return dict(api.objects[("agentjobs", name)]["status"])


@pytest.mark.redis
async def test_a_delegated_jobs_end_leaves_the_chain_to_its_caller(
    api: FakeApi, redis: Redis
) -> None:
    api.put("aiagents", agent("lead"))
    api.put("aiagents", agent("helper"))
    api.put("agentjobs", sealed(_job("lead-1", ["lead"], "Running")))
    api.put("agentjobs", sealed(_job("helper-1", ["lead", "helper"], "Succeeded", "lead-1")))
    rt = Runtime.from_client(SETTINGS, redis)

    await resync.resync(rt, api.objects[("agentjobs", "helper-1")])
    helper = _status(api, "helper-1")
    assert [(n["action"], n["reason"]) for n in helper["next"]] == [("none", "BranchEnded")]
    assert "lead-1" in helper["next"][0]["message"]
    assert helper["branchEnded"] is True and not helper.get("chainComplete")
    record = await rt.chains.get(NS, CHAIN)
    assert record is None or not record.complete
    writes = len(api.writes)
    await resync.resync(rt, api.objects[("agentjobs", "helper-1")])
    assert len(api.writes) == writes  # Settled: nothing redone.

    api.put("agentjobs", sealed(_job("lead-1", ["lead"], "Succeeded")))
    await resync.resync(rt, api.objects[("agentjobs", "lead-1")])
    lead = _status(api, "lead-1")
    assert [(n["action"], n["reason"]) for n in lead["next"]] == [("none", "ChainComplete")]
    assert lead["chainComplete"] is True
    record = await rt.chains.get(NS, CHAIN)
    assert record is not None and record.complete and record.last_job == "lead-1"
    writes = len(api.writes)
    for name in ("helper-1", "lead-1"):
        await resync.resync(rt, api.objects[("agentjobs", name)])
    assert len(api.writes) == writes


@pytest.mark.redis
async def test_a_hand_made_job_with_the_chains_label_does_not_hold_it_open(
    api: FakeApi, redis: Redis
) -> None:
    api.put("aiagents", agent("lead"))
    api.put("aiagents", agent("helper"))
    api.put("agentjobs", sealed(_job("lead-1", ["lead"], "Succeeded")))
    api.put("agentjobs", _job("claimed", ["lead", "helper"], "Running", "lead-1"))  # No seal.
    rt = Runtime.from_client(SETTINGS, redis)

    await resync.resync(rt, api.objects[("agentjobs", "lead-1")])
    lead = _status(api, "lead-1")
    assert lead["chainComplete"] is True and not lead.get("branchEnded")
    record = await rt.chains.get(NS, CHAIN)
    assert record is not None and record.complete


@pytest.mark.redis
async def test_a_parent_cut_short_before_its_close_does_not_hold_its_childs_chain_open(
    api: FakeApi, redis: Redis
) -> None:
    api.put("aiagents", agent("developer"))
    api.put("aiagents", agent("reviewer"))
    # The operator died after creating the child and before the parent's close: the
    # parent still shows Running, with no ``status.next``.
    api.put("agentjobs", sealed(_job("dev-1", ["developer"], "Running")))
    child = naming.child_name("dev-1", "reviewer")
    api.put("agentjobs", sealed(_job(child, ["developer", "reviewer"], "Succeeded", "dev-1")))
    rt = Runtime.from_client(SETTINGS, redis)

    await resync.resync(rt, api.objects[("agentjobs", child)])
    reviewer = _status(api, child)
    assert [(n["action"], n["reason"]) for n in reviewer["next"]] == [("none", "ChainComplete")]
    assert reviewer["chainComplete"] is True and not reviewer.get("branchEnded")
    record = await rt.chains.get(NS, CHAIN)
    assert record is not None and record.complete and record.last_job == child


@pytest.mark.redis
async def test_a_grandparent_cut_short_before_its_close_does_not_hold_the_chain_open(
    api: FakeApi, redis: Redis
) -> None:
    for role in ("triage", "developer", "reviewer"):
        api.put("aiagents", agent(role))
    # Crashes cut short both the triage's and the developer's close: each made its
    # child, neither wrote ``status.next``; the resync has not replayed them yet.
    api.put("agentjobs", sealed(_job("triage-1", ["triage"], "Succeeded")))
    dev = naming.child_name("triage-1", "developer")
    api.put("agentjobs", sealed(_job(dev, ["triage", "developer"], "Succeeded", "triage-1")))
    rev = naming.child_name(dev, "reviewer")
    path = ["triage", "developer", "reviewer"]
    api.put("agentjobs", sealed(_job(rev, path, "Succeeded", dev)))
    rt = Runtime.from_client(SETTINGS, redis)

    await resync.resync(rt, api.objects[("agentjobs", rev)])
    reviewer = _status(api, rev)
    assert [(n["action"], n["reason"]) for n in reviewer["next"]] == [("none", "ChainComplete")]
    record = await rt.chains.get(NS, CHAIN)
    assert record is not None and record.complete and record.last_job == rev
