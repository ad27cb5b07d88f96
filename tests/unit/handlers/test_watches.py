"""What the operator's own watches keep and decide before any I/O (issue 21).

Aspects covered:
- trims keep exactly what the engine reads of a pod and of a batch Job;
- a settled AgentJob's pod and Job events are dropped, whatever the Job's owner;
  a running pod the watched AgentJob already runs in is dropped, a terminated one not;
- kopf's namespace patterns (globs, ``!`` negations) select the same namespaces;
- the dispatcher runs one object's work one at a time, folds events that arrive
  meanwhile into the newest, runs different objects side by side, and counts the
  backlog down to done.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from agentchain import models
from agentchain.core.unsettled import Backlog, Unsettled
from agentchain.handlers import jobevents, podevents
from agentchain.handlers.ordering import Dispatcher
from agentchain.handlers.watches import namespace_filter
from agentchain.workspaces.rules import jobmounts

Obj = dict[str, Any]
SETTLED: dict[str, Any] = {
    "phase": "Succeeded",
    "next": [{"action": "none"}],
    "chainComplete": True,
}


def pod(name: str = "p", owner: str = "aj", **state: Any) -> Obj:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": "pu",
            "resourceVersion": "7",
            "labels": {models.AGENTJOB_LABEL: owner, "job-name": "aj-a1"},
            "ownerReferences": [{"kind": "Job", "name": "aj-a1", "uid": "ju"}],
            "managedFields": [{"manager": "kubelet"}],
            "annotations": {"big": "x" * 1000},
        },
        "spec": {"containers": [{"name": "agent", "image": "i"}]},
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.1",
            "containerStatuses": [{"name": "agent", "state": state, "imageID": "sha"}],
        },
    }


def batch_job(owner: str = "aj", owned: bool = True) -> Obj:
    refs = [{"kind": "AgentJob", "name": owner, "uid": "au"}] if owned else []
    return {
        "metadata": {
            "name": "aj-a1",
            "namespace": "ns",
            "uid": "ju",
            "labels": {models.AGENTJOB_LABEL: owner},
            "ownerReferences": refs,
            "managedFields": [{}],
        },
        "spec": {"template": {}},
        "status": {"conditions": [{"type": "Complete", "status": "True", "message": "m"}]},
    }


def test_trimmed_pod_and_job_keep_what_the_engine_reads() -> None:
    terminated: dict[str, Any] = {"terminated": {"exitCode": 0}}
    assert podevents.trim_pod(pod(**terminated)) == {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "pu",
            "resourceVersion": "7",
            "labels": {models.AGENTJOB_LABEL: "aj", "job-name": "aj-a1"},
            "ownerReferences": [{"kind": "Job", "name": "aj-a1", "uid": "ju"}],
        },
        "status": {
            "phase": "Running",
            "containerStatuses": [{"name": "agent", "state": terminated}],
        },
    }
    trimmed = podevents.trim_job(batch_job())
    assert set(trimmed) == {"metadata", "status"} and "managedFields" not in trimmed["metadata"]
    assert trimmed["status"] == {
        "conditions": [{"type": "Complete", "status": "True", "reason": None}]
    }
    assert "managedFields" not in jobevents.trim(batch_job())["metadata"]


class Submitted:
    def __init__(self) -> None:
        self.keys: list[Hashable] = []

    def __call__(self, key: Hashable, work: Callable[[], Awaitable[object]]) -> None:
        self.keys.append(key)


class FakeRuntime:
    """Only the indexes the watch consumers read: no stores, no I/O."""

    def __init__(self) -> None:
        from agentchain.core.podowners import BatchJobs, Pods

        self.unsettled = Unsettled()
        self.jobs = BatchJobs()
        self.pods = Pods()


def agentjob(name: str = "aj", **status: Any) -> Obj:
    meta = {"namespace": "ns", "name": name, "uid": "au"}
    return {"metadata": meta, "spec": {"agentRole": "a"}, "status": status}


def test_settled_jobs_pods_and_jobs_are_dropped() -> None:
    rt: Any = FakeRuntime()
    rt.unsettled.observe(agentjob(**SETTLED), 0.0, 1.0)
    submitted = Submitted()
    podevents.pod_changed(rt, submitted, "ADDED", pod(terminated={"exitCode": 0}))
    podevents.job_changed(rt, submitted, "ADDED", batch_job())
    assert submitted.keys == []
    assert rt.jobs.get("ns", "aj-a1") is None  # Not even indexed.
    podevents.job_changed(rt, submitted, "ADDED", batch_job(owned=False))
    assert submitted.keys == []


def test_a_running_pod_of_a_job_that_says_so_is_dropped_a_terminated_one_not() -> None:
    rt: Any = FakeRuntime()
    rt.unsettled.observe(agentjob(phase="Running", podName="p"), 0.0, 1.0)
    submitted = Submitted()
    podevents.pod_changed(rt, submitted, "MODIFIED", pod(running={}))
    assert submitted.keys == []
    podevents.pod_changed(rt, submitted, "MODIFIED", pod("other", running={}))
    podevents.pod_changed(rt, submitted, "MODIFIED", pod(terminated={"exitCode": 1}))
    podevents.job_changed(rt, submitted, "MODIFIED", batch_job())
    assert submitted.keys == [("pods", "ns", "other"), ("pods", "ns", "p"), ("jobs", "ns", "aj-a1")]
    assert rt.jobs.get("ns", "aj-a1") is not None  # Indexed before its pods are looked at.


def test_namespace_patterns_read_as_kopf_reads_them() -> None:
    allowed = namespace_filter(["team-*", "!team-secret"])
    assert [allowed(n) for n in ("team-a", "team-secret", "other")] == [True, False, False]
    only_not = namespace_filter(["!kube-*"])
    assert only_not("default") and not only_not("kube-system")


async def test_dispatcher_serialises_per_object_and_folds_into_the_newest() -> None:
    backlog = Backlog(listed=True)
    dispatcher = Dispatcher(backlog, concurrency=4)
    ran: list[str] = []
    release = asyncio.Event()

    def work(label: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            ran.append(f"start {label}")
            await release.wait()
            ran.append(f"end {label}")

        return run

    dispatcher.submit("a", work("a1"))
    dispatcher.submit("a", work("a2"))  # Folded away by a3.
    dispatcher.submit("a", work("a3"))
    dispatcher.submit("b", work("b1"))
    await asyncio.sleep(0.01)
    assert sorted(ran) == ["start a1", "start b1"]  # Side by side, a2/a3 wait for a1.
    assert (backlog.state(), backlog.pending) == ("working", 2)
    release.set()
    async with asyncio.timeout(5):
        while len(dispatcher):
            await asyncio.sleep(0.01)
    assert [r for r in ran if " a" in r] == ["start a1", "end a1", "start a3", "end a3"]
    assert backlog.state() == "done"


async def test_a_failing_event_is_logged_and_the_object_runs_again_later() -> None:
    dispatcher = Dispatcher(Backlog(listed=True))
    ran: list[int] = []

    async def fails() -> None:
        ran.append(1)
        raise RuntimeError("boom")

    async def works() -> None:
        ran.append(2)

    dispatcher.submit("a", fails)
    async with asyncio.timeout(5):
        while len(dispatcher):
            await asyncio.sleep(0.01)
    dispatcher.submit("a", works)
    async with asyncio.timeout(5):
        while len(dispatcher):
            await asyncio.sleep(0.01)
    assert ran == [1, 2]
    await dispatcher.close()


def test_job_events_tell_the_index_whether_the_running_job_is_quiet() -> None:
    rt: Any = FakeRuntime()
    running = agentjob(phase="Running", podName="p", jobName="aj-a1")
    rt.unsettled.observe(running, 0.0, 1.0)
    submitted = Submitted()
    not_ended = batch_job()
    not_ended["status"]["conditions"] = []
    podevents.job_changed(rt, submitted, "ADDED", not_ended)
    assert rt.unsettled.quiet(running)
    podevents.job_changed(rt, submitted, "MODIFIED", batch_job())
    assert not rt.unsettled.quiet(running)
    podevents.job_changed(rt, submitted, "MODIFIED", not_ended)
    podevents.job_changed(rt, submitted, "DELETED", not_ended)
    assert not rt.unsettled.quiet(running)


def test_a_chains_publish_job_is_handed_on_once_ended_even_after_the_root_settled() -> None:
    """Issue 18: the publish Job carries its root's label (so the label-selected watch
    sees it) but is no attempt of it: its end goes to ``publishing``, not ``finishing``."""
    rt: Any = FakeRuntime()
    rt.unsettled.observe(agentjob(**SETTLED), 0.0, 1.0)
    job = batch_job()
    job["metadata"]["name"] = "agentchain-publish-c0ffee"
    job["metadata"]["labels"][jobmounts.WORKSPACE_LABEL] = "c0ffee"
    running = {**job, "status": {"conditions": []}}
    submitted = Submitted()
    podevents.job_changed(rt, submitted, "MODIFIED", running)
    podevents.job_changed(rt, submitted, "DELETED", job)
    assert submitted.keys == []
    podevents.job_changed(rt, submitted, "MODIFIED", job)
    assert submitted.keys == [("jobs", "ns", "agentchain-publish-c0ffee")]
    assert rt.jobs.get("ns", "agentchain-publish-c0ffee") is None  # Not an attempt's Job.
