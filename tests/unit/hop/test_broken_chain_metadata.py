"""A hand-made AgentJob whose chain annotations are partial settles with its first end.

Against an in-process API server and a real Redis.  Aspects covered:
- the resync of such a job (chain id without path or depth) ends it ``Failed`` with
  ``InvalidChainMetadata`` and settles it in the same patch (``status.next`` and
  ``chainComplete``), raising nothing: the watch index then drops it, so the periodic
  resync neither looks at it again nor logs the same traceback every period;
- a later resync of the settled job writes nothing and logs no error.
"""

from __future__ import annotations

import logging

import pytest
from redis.asyncio import Redis

from agentchain.core import unsettled
from agentchain.core.runtime import Runtime
from agentchain.hop import resync
from tests.unit.fakeapi import FakeApi, Obj
from tests.unit.hop.test_hop_write_order import SETTINGS, agent

# The in-process API server and its kubeconfig, as fixtures (re-exported by name).
from tests.unit.hop.test_hop_write_order import api as api
from tests.unit.hop.test_hop_write_order import kubeconfig as kubeconfig

NS = "team-a"


def _hand_made() -> Obj:
    return {
        "apiVersion": "labrats.work/v1alpha1",
        "kind": "AgentJob",
        "metadata": {
            "name": "partial",
            "namespace": NS,
            "annotations": {"labrats.work/chain-id": "c0ffee"},
        },
        "spec": {"agentRole": "writer", "prompt": "write it"},
    }


@pytest.mark.redis
async def test_partial_chain_metadata_settles_with_its_end(
    api: FakeApi, redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    api.put("aiagents", agent("writer"))
    api.put("agentjobs", _hand_made())
    rt = Runtime.from_client(SETTINGS, redis)
    with caplog.at_level(logging.WARNING):
        await resync.resync(rt, api.objects[("agentjobs", "partial")])
        ended = api.objects[("agentjobs", "partial")]
        status = ended["status"]
        assert (status["phase"], status["reason"]) == ("Failed", "InvalidChainMetadata")
        assert status["chainComplete"] is True
        assert [n["reason"] for n in status["next"]] == ["InvalidChainMetadata"]
        assert not unsettled.needs_resync(ended)
        writes = len(api.writes)
        await resync.resync(rt, ended)
        assert len(api.writes) == writes
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not any(w.kind == "jobs" for w in api.writes)  # It never ran.
