"""The index the resync walks, and which watched jobs the event handler starts.

Aspects covered:
- a job is due one interval after it is first seen, then once per interval;
- a settled job leaves the index, an unreadable status stays in it;
- a newer body replaces the old without resetting when it is due; a recreated job
  (same name, new uid) starts over; a deletion of an older uid leaves the new one;
- ``wants_start``: new and Waiting jobs yes, launched or ended jobs no;
- ``waiting_for_agent``: the namespace's jobs waiting for their AiAgent, and new ones
  the engine has not written to (one may be deciding to wait), nothing else;
- ``current`` stands in for a read only with the watched body of our own last write
  (same uid and resourceVersion), or that write's answer while the watch still shows
  the version it was made over, as a copy; never once the job settles or is deleted.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio import Redis

from agentchain.core import statuswriting
from agentchain.core.runtime import Runtime
from agentchain.core.unsettled import Unsettled, needs_resync
from agentchain.hop.reconciling import wants_start
from agentchain.settings import Settings

Obj = dict[str, Any]
RT = Runtime.from_client(Settings(), Redis())  # Never connects: no command is sent.


def job(name: str = "j", uid: str = "u1", **status: Any) -> Obj:
    return {
        "metadata": {"namespace": "ns", "name": name, "uid": uid},
        "spec": {"agentRole": "a"},
        "status": status,
    }


SETTLED: dict[str, Any] = {
    "phase": "Succeeded",
    "next": [{"action": "none", "reason": "ChainComplete"}],
    "chainComplete": True,
}


def test_due_one_interval_after_first_seen_then_every_interval() -> None:
    index = Unsettled()
    index.observe(job(), now=100.0, interval=30.0)
    assert index.take_due(129.9, 30.0) == []
    assert [o["metadata"]["name"] for o in index.take_due(130.0, 30.0)] == ["j"]
    assert index.take_due(159.0, 30.0) == []
    assert len(index.take_due(160.0, 30.0)) == 1


def test_settling_removes_and_unreadable_status_stays() -> None:
    index = Unsettled()
    index.observe(job(), 0.0, 1.0)
    index.observe(job(**SETTLED), 0.5, 1.0)
    assert len(index) == 0
    broken = job(phase=["not", "a", "phase"])
    assert needs_resync(broken)
    index.observe(broken, 0.0, 1.0)
    assert len(index) == 1


def test_newer_body_keeps_its_due_time_and_a_recreated_job_starts_over() -> None:
    index = Unsettled()
    index.observe(job(phase="Pending"), 0.0, 10.0)
    index.observe(job(phase="Running"), 9.0, 10.0)
    due = index.take_due(10.0, 10.0)
    assert [o["status"]["phase"] for o in due] == ["Running"]
    index.observe(job(uid="u2"), 10.5, 10.0)
    assert index.take_due(20.0, 10.0) == []  # u2 was first seen at 10.5.
    index.forget(job(uid="u1"))  # The old object's deletion arrives late.
    assert len(index) == 1
    index.forget(job(uid="u2"))
    assert len(index) == 0


@given(
    phase=st.sampled_from([None, "Pending", "Waiting", "Running", "Succeeded", "Failed"]),
    job_name=st.none() | st.just("j-a1"),
)
def test_wants_start_only_what_is_neither_launched_nor_ended(
    phase: str | None, job_name: str | None
) -> None:
    status = {k: v for k, v in {"phase": phase, "jobName": job_name}.items() if v}
    expected = job_name is None and phase not in ("Succeeded", "Failed")
    assert wants_start(RT, job(uid=f"fresh-{phase}-{job_name}", **status)) is expected


def test_waiting_on_finds_waiting_dependents_in_the_namespace_only() -> None:
    index = Unsettled()
    waiting = job("after", phase="Waiting")
    waiting["spec"]["dependsOn"] = ["first", "second"]
    running = job("busy", uid="u2", phase="Running")
    running["spec"]["dependsOn"] = ["first"]
    elsewhere = job("after", uid="u3", phase="Waiting")
    elsewhere["metadata"]["namespace"] = "other"
    elsewhere["spec"]["dependsOn"] = ["first"]
    for obj in (waiting, running, elsewhere):
        index.observe(obj, 0.0, 1.0)
    assert index.waiting_on("ns", "first") == [waiting]
    assert index.waiting_on("ns", "second") == [waiting]
    assert index.waiting_on("ns", "third") == []


def test_waiting_for_agent_finds_unlaunched_jobs_waiting_or_unwritten_in_the_namespace() -> None:
    index = Unsettled()
    waiting = job("waits", phase="Pending", reason="WaitingForAgent")
    new = job("new", uid="u2")
    queued = job("queued", uid="u3", phase="Queued", reason="Queued")
    approval = job("approval", uid="u4", phase="AwaitingApproval", reason="AwaitingApproval")
    launched = job("launched", uid="u5", phase="Pending", reason="JobCreated", jobName="b")
    deps = job("deps", uid="u6", phase="Waiting", reason="WaitingForDependencies")
    elsewhere = job("waits", uid="u7", phase="Pending", reason="WaitingForAgent")
    elsewhere["metadata"]["namespace"] = "other"
    for obj in (waiting, new, queued, approval, launched, deps, elsewhere):
        index.observe(obj, 0.0, 1.0)
    assert index.waiting_for_agent("ns") == [waiting, new]
    assert index.waiting_for_agent("other") == [elsewhere]
    assert index.waiting_for_agent("none") == []


def versioned(rv: str, uid: str = "u1", **status: Any) -> Obj:
    obj = job(uid=uid, **status)
    obj["metadata"]["resourceVersion"] = rv
    return obj


def test_current_is_the_watched_body_of_our_last_write_only() -> None:
    writes = statuswriting.Writes()
    index = Unsettled(writes)
    writes.forget("ns", "j")
    index.observe(versioned("10", phase="Running"), 0.0, 1.0)
    assert index.current("ns", "j") is None  # No write of ours: read.
    writes.wrote(versioned("11", phase="Running"))
    assert index.current("ns", "j") is None  # The watch has not delivered it yet.
    index.observe(versioned("11", phase="Running"), 0.0, 1.0)
    found = index.current("ns", "j")
    assert found == versioned("11", phase="Running")
    found["status"]["phase"] = "Succeeded"  # The caller's patches change its copy only.
    assert (index.current("ns", "j") or {})["status"]["phase"] == "Running"
    index.observe(versioned("12", phase="Running"), 0.0, 1.0)
    assert index.current("ns", "j") is None  # Someone else wrote since.


def test_while_the_watch_lags_our_write_its_answer_stands_in() -> None:
    writes = statuswriting.Writes()
    index = Unsettled(writes)
    index.observe(versioned("10", phase="Pending"), 0.0, 1.0)
    writes.wrote(versioned("11", phase="Running"), over="10")
    found = index.current("ns", "j")  # The watch still shows the version written over.
    assert found == versioned("11", phase="Running")
    found["status"]["phase"] = "Succeeded"  # A copy: the kept answer is not changed.
    assert (index.current("ns", "j") or {})["status"]["phase"] == "Running"
    index.observe(versioned("11", phase="Running"), 0.0, 1.0)  # Caught up: the watch's.
    assert index.current("ns", "j") == versioned("11", phase="Running")
    writes.wrote(versioned("13", phase="Running"), over="11")
    index.observe(versioned("12", phase="Running"), 0.0, 1.0)  # Someone else's write.
    assert index.current("ns", "j") is None
    writes.wrote(versioned("15"), over="14")  # Made over a version the watch never showed.
    assert index.current("ns", "j") is None


def test_current_is_never_another_object_of_the_same_name() -> None:
    writes = statuswriting.Writes()
    index = Unsettled(writes)
    writes.wrote(versioned("11"))
    index.observe(versioned("11", uid="u2"), 0.0, 1.0)
    assert index.current("ns", "j") is None


def test_a_settled_or_deleted_job_is_read_again() -> None:
    writes = statuswriting.Writes()
    index = Unsettled(writes)
    writes.wrote(versioned("11"))
    index.observe(versioned("11"), 0.0, 1.0)
    assert index.current("ns", "j") is not None
    index.observe(versioned("12", **SETTLED), 0.0, 1.0)
    assert index.current("ns", "j") is None and writes.last("ns", "j") is None
    writes.wrote(versioned("13"))
    index.observe(versioned("13"), 0.0, 1.0)
    index.forget(versioned("13"))
    assert index.current("ns", "j") is None and writes.last("ns", "j") is None


def test_incomplete_write_answers_are_not_remembered() -> None:
    writes = statuswriting.Writes()
    writes.forget("ns", "j")
    writes.wrote(None)
    writes.wrote({"metadata": {"namespace": "ns", "name": "j", "uid": "u1"}})
    assert writes.last("ns", "j") is None


def test_settled_names_are_known_until_the_job_unsettles_or_goes() -> None:
    index = Unsettled()
    index.observe(job(**SETTLED), 0.0, 1.0)
    assert index.is_settled("ns", "j") and not index.is_settled("ns", "other")
    index.observe(job(uid="u2"), 0.0, 1.0)  # Re-created under the same name.
    assert not index.is_settled("ns", "j")
    index.observe(job(uid="u2", **SETTLED), 0.0, 1.0)
    index.forget(job(uid="u2"))
    assert not index.is_settled("ns", "j")


def test_running_in_only_the_pod_the_watched_job_names() -> None:
    index = Unsettled()
    index.observe(job(phase="Pending"), 0.0, 1.0)
    assert not index.running_in("ns", "j", "pod-1")
    index.observe(job(phase="Running", podName="pod-1"), 0.0, 1.0)
    assert index.running_in("ns", "j", "pod-1")
    assert not index.running_in("ns", "j", "pod-2")
    assert not index.running_in("ns", "unknown", "pod-1")


def test_a_transition_is_told_once_and_a_first_sight_not_at_all() -> None:
    index = Unsettled()
    assert index.observe(job(phase="Pending"), 0.0, 1.0) is None
    assert index.observe(job(phase="Running"), 0.0, 1.0) == ("Pending", "Running")
    assert index.observe(job(phase="Running"), 0.0, 1.0) is None
    assert index.observe(job(**SETTLED), 0.0, 1.0) == ("Running", "Succeeded")
    assert index.observe(job(**SETTLED), 0.0, 1.0) is None  # Settled: not indexed.
    assert index.observe(job(uid="u2", phase="Running"), 0.0, 1.0) is None


def test_backlog_is_done_once_listed_and_idle_and_stays_done() -> None:
    backlog = Unsettled().backlog
    assert backlog.state() == "listing"
    backlog.update(0)
    assert backlog.state() == "listing"
    backlog.listed = True
    backlog.update(3)
    assert (backlog.state(), backlog.pending) == ("working", 3)
    backlog.update(0)
    backlog.update(5)
    assert backlog.state() == "done"


def test_quiet_only_while_running_with_its_batch_job_watched_not_ended() -> None:
    index = Unsettled()
    running = job(phase="Running", jobName="j-a1")
    index.observe(running, 0.0, 1.0)
    assert not index.quiet(running)  # Its Job not seen since: the resync reads.
    index.job_watched("ns", "j", "j-a1", ended=False)
    assert index.quiet(running)
    index.job_watched("ns", "j", "j-a1", ended=True)
    assert not index.quiet(running)  # Ended: an event whose handler failed, perhaps.
    index.job_watched("ns", "j", "j-a1", ended=False)
    index.job_gone("ns", "j", "j-a1")
    assert not index.quiet(running)  # Deleted: the resync says it disappeared.
    index.job_watched("ns", "j", "j-a0", ended=False)
    assert not index.quiet(running)  # Another attempt's Job.
    pending = job(phase="Pending", jobName="j-a1")
    index.observe(pending, 0.0, 1.0)
    index.job_watched("ns", "j", "j-a1", ended=False)
    assert not index.quiet(pending)
    assert not index.quiet(job(uid="u2", phase="Running", jobName="j-a1"))


def test_reset_forgets_jobs_settled_names_and_the_backlog() -> None:
    index = Unsettled()
    index.observe(job("a", phase="Running"), 0.0, 1.0)
    index.observe(job("b", uid="u2", **SETTLED), 0.0, 1.0)
    index.backlog.listed = True
    index.backlog.update(0)
    index.reset()
    assert len(index) == 0 and not index.is_settled("ns", "b")
    assert index.backlog.state() == "listing"
