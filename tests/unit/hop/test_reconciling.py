"""One level-triggered function per AgentJob, against the in-process API server and a
real Redis.

The hop used to have an entry point per event (a pod's end, a Job's end, a new job,
the resync, a retry's timer) and two in-memory sets of what had been handled; now
every caller names the AgentJob and ``hop.reconciling.reconcile`` reads what exists.
Aspects covered:
- the resync of a running job whose pod's end the watches hold (its event's work
  failed) ends the attempt from the watches' indexes: no read of its batch Job, no
  list of its pods, and the same hop as the pod event's;
- a look at a launched job with nothing new (its Job running, its pod running, no
  ending recorded) makes no request at all;
- a stop looked at again (another event, the resync) after its hop failed deletes the
  batch Job once, and the next look ends the job ``Cancelled`` from the claim;
- a stop is applied when the watch delivered our own last write before its answer was
  recorded (the answer then stays, older than the annotated body the watch shows).
"""

from __future__ import annotations

import copy

import pytest
from redis.asyncio import Redis

from agentchain.core.runtime import Runtime
from agentchain.flow.rules import stoprules
from agentchain.hop import reconciling, resync, stopping
from agentchain.kube import apierrors
from tests.unit.fakeapi import FakeApi, Obj
from tests.unit.hop.test_hop_write_order import EXIT, NS, SETTINGS, api, kubeconfig, seed
from tests.unit.hop.watched import show

__all__ = ["api", "kubeconfig"]  # Fixtures.
pytestmark = pytest.mark.redis


def parent(api: FakeApi) -> Obj:
    return copy.deepcopy(api.objects[("agentjobs", "p")])


async def test_the_resync_reads_an_ended_attempt_from_the_watches(
    api: FakeApi, redis: Redis
) -> None:
    seed(api)
    rt = Runtime.from_client(SETTINGS, redis)
    rt.unsettled.observe(parent(api), 0.0, 1.0)
    show(rt, parent(api), EXIT)  # The pod's end reached the index; its work failed.
    requests: list[tuple[str, str, str | None]] = []

    async def count(method: str, kind: str, name: str | None) -> None:
        requests.append((method, kind, name))

    api.before_request = count
    await resync.resync(rt, parent(api))
    reads = [(kind, name) for method, kind, name in requests if method == "GET"]
    assert ("jobs", "p") not in reads and ("pods", None) not in reads, reads
    status = api.objects[("agentjobs", "p")]["status"]
    assert status["phase"] == "Succeeded" and status["next"][0]["action"] == "spawned"


async def test_a_look_with_nothing_new_makes_no_request(api: FakeApi, redis: Redis) -> None:
    seed(api)
    rt = Runtime.from_client(SETTINGS, redis)
    rt.unsettled.observe(parent(api), 0.0, 1.0)
    show(rt, parent(api), None)  # Its Job and its pod run; the job says Running.
    requests: list[tuple[str, str, str | None]] = []

    async def count(method: str, kind: str, name: str | None) -> None:
        requests.append((method, kind, name))

    api.before_request = count
    await reconciling.reconcile(rt, NS, "p")
    assert requests == []


async def test_a_stop_looked_at_again_deletes_its_batch_job_once(
    api: FakeApi, redis: Redis
) -> None:
    seed(api)
    asked = stoprules.StopRequest(by="api", reason="not needed")
    api.update("agentjobs", "p", {"metadata": {"annotations": stoprules.annotations_for(asked)}})
    api.put("jobs", {"metadata": {"name": "p", "namespace": NS}})
    rt = Runtime.from_client(SETTINGS, redis)
    rt.unsettled.observe(parent(api), 0.0, 1.0)
    api.fail_at = 1  # The Job's delete goes out; the hop's first write after it fails.
    with pytest.raises(apierrors.Forbidden):
        await reconciling.reconcile(rt, NS, "p")
    api.fail_at = None
    await stopping.stop(rt, parent(api))  # The stop's event, delivered again.
    await reconciling.reconcile(rt, NS, "p")  # The resync's look.
    deletes = [(w.kind, w.name) for w in api.writes if w.method == "DELETE"]
    assert deletes == [("jobs", "p")]
    status = api.objects[("agentjobs", "p")]["status"]
    assert (status["phase"], status["reason"]) == ("Cancelled", "Stopped")
    assert status["next"][0]["action"] == "stopped"


async def test_a_stop_after_our_own_write_is_seen_whatever_order_its_answer_came_in(
    api: FakeApi, redis: Redis
) -> None:
    seed(api)
    api.put("jobs", {"metadata": {"name": "p", "namespace": NS}})
    rt = Runtime.from_client(SETTINGS, redis)
    before = parent(api)
    written = api.update("agentjobs", "p", {"status": {"message": "Pod p-pod is running."}})
    assert written is not None
    rt.unsettled.observe(copy.deepcopy(written), 0.0, 1.0)  # The watch was first...
    rt.writes.wrote(copy.deepcopy(written), before["metadata"]["resourceVersion"])  # ...then it.
    asked = stoprules.StopRequest(by="api", reason="not needed")
    api.update("agentjobs", "p", {"metadata": {"annotations": stoprules.annotations_for(asked)}})
    rt.unsettled.observe(parent(api), 0.0, 1.0)
    show(rt, parent(api), None)  # Its Job and its pod still run.
    await reconciling.reconcile(rt, NS, "p")
    status = api.objects[("agentjobs", "p")]["status"]
    assert (status["phase"], status["reason"]) == ("Cancelled", "Stopped")
