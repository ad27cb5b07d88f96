"""Concurrency groups on the real control plane (issue 16).

Aspects covered:
- ``queue``, limit 1: 50 signed deliveries for one issue, sent at once, run strictly
  one at a time (each job's container prints when it started and ended; no two
  intervals overlap) and in delivery order (the order of the tickets the webhook
  stamped on them), across a SIGKILL of the operator in the middle; while one runs
  the others show phase ``Queued``;
- ``cancel-in-progress``, limit 1: of 50 deliveries sent at once, across a SIGKILL of
  the operator once a third have ended, only the last (newest ticket) completes; every
  other chain ends ``Cancelled``, reason ``Superseded``, with ``supersededBy`` naming a
  newer job of the group, and nothing follows it;
- ``refuse``, limit 1: a second chain while one runs ends Failed, ``ConcurrencyLimited``;
  once the first completes, the group admits again;
- ``AGENTCHAIN_MAX_RUNNING_JOBS_PER_NAMESPACE=1``: three two-step chains run their six
  jobs one at a time (children included), the waiting ones in ``Queued``;
- the API's manual runs name a group (``concurrencyGroup``) for an agent without one.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import time
import urllib.request
from typing import Any

from agentchain.flow.rules import concurrency
from e2e import chaining, delivering, operating
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]
# Prints when it started and ended, with the clock's full resolution (status times
# have whole seconds only).  Standard library only: it runs as a host process.
TIMED = (
    "import time; print('start %.6f' % time.time(), flush=True); time.sleep({sleep}); "
    "print('end %.6f' % time.time())"
)
OPENED = [{"source": "github", "events": ["issues.opened"], "next": None}]


def _per_issue(policy: str) -> Obj:
    """A ``spec.concurrency`` letting one run of an issue's chain in at a time."""
    return {"group": "{{ repository }}#{{ issue.number }}", "limit": 1, "policy": policy}


def _deliver(
    operator: operating.OperatorProcess, namespace: str, count: int, number: int
) -> list[str]:
    """``count`` deliveries for issue ``number``, sent at once; the names of their jobs
    in ``namespace`` (agents of earlier tests' namespaces may match too)."""

    def one(_: int) -> str:
        body, headers = delivering.signed(operator.webhook_secret, delivering.issue_opened(number))
        code, answer = delivering.send(operator, body, headers)
        assert code == 202, answer
        [job] = [j for j in answer["jobs"] if j["namespace"] == namespace]
        return str(job["name"])

    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        return list(pool.map(one, range(count)))


def _jobs(info: ClusterInfo, namespace: str) -> dict[str, Obj]:
    items = operating.get_json(info, "agentjobs", "-n", namespace)["items"]
    return {j["metadata"]["name"]: j for j in items}


def _phase(job: Obj) -> str:
    return str((job.get("status") or {}).get("phase") or "")


def _ended(job: Obj) -> bool:
    return _phase(job) in ("Succeeded", "Cancelled", "Failed")


def _complete(job: Obj) -> bool:
    return _ended(job) and bool(job["status"].get("chainComplete"))


def _ticket(job: Obj) -> int:
    return int(job["metadata"]["annotations"][concurrency.TICKET])


def _times(job: Obj) -> tuple[float, float]:
    result = job["status"]["result"]
    stamps = dict(line.split() for line in result.splitlines() if line.startswith(("start", "end")))
    return float(stamps["start"]), float(stamps["end"])


def _wait_ready(info: ClusterInfo, namespace: str, name: str) -> None:
    def ready() -> bool:
        agent = operating.get_json(info, "aiagent", name, "-n", namespace)
        conditions = (agent.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    operating.wait_until(ready, timeout=30, what=f"{name} Ready")
    time.sleep(2.5)  # The webhook's agent listing is refreshed every 2 s.


QUEUED = 50


def test_a_queue_of_one_runs_fifty_chains_one_at_a_time_in_delivery_order(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    timed = chaining.python_command(TIMED.format(sleep=0.2))
    agent = chaining.ai_agent("serial", timed, triggers=OPENED, concurrency=_per_issue("queue"))
    chaining.apply(info, namespace, agent)
    _wait_ready(info, namespace, "serial")
    names = _deliver(operator, namespace, QUEUED, number=7)
    assert len(set(names)) == QUEUED

    def done(count: int) -> bool:
        jobs = _jobs(info, namespace)
        return len(jobs) == QUEUED and sum(_phase(j) == "Succeeded" for j in jobs.values()) >= count

    operating.wait_until(lambda: done(QUEUED // 3), timeout=240, interval=1, what="a third done")
    phases = [_phase(j) for j in _jobs(info, namespace).values()]
    assert phases.count("Queued") > 0, phases
    assert phases.count("Running") + phases.count("Pending") <= 1, phases
    operator.kill()
    operator.start()
    operating.wait_until(lambda: done(QUEUED), timeout=420, interval=2, what="all 50 done")

    jobs = sorted(_jobs(info, namespace).values(), key=_ticket)
    assert len({_ticket(j) for j in jobs}) == QUEUED
    intervals = [_times(j) for j in jobs]
    for (start, end), (next_start, _) in itertools.pairwise(intervals):
        assert start < end <= next_start, "two chains of the group overlapped or ran out of order"
    assert all(j["status"].get("chainComplete") for j in jobs)


def test_cancel_in_progress_leaves_only_the_newest_chain(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    # Long enough that every delivery's job is admitted while the older ones still run:
    # on a loaded machine the engine admitted the last ones more than 4 s after the first
    # started, so a first job that had ended by then rightly Succeeded (seen twice), and
    # on real nodes at load 20 a job running across the operator's restart outlived 12 s.
    timed = chaining.python_command(TIMED.format(sleep=30))
    agent = chaining.ai_agent(
        "latest", timed, triggers=OPENED, concurrency=_per_issue("cancel-in-progress")
    )
    chaining.apply(info, namespace, agent)
    _wait_ready(info, namespace, "latest")
    names = _deliver(operator, namespace, QUEUED, number=8)
    assert len(set(names)) == QUEUED

    def ended(count: int) -> bool:
        jobs = _jobs(info, namespace)
        return len(jobs) == len(names) and sum(map(_ended, jobs.values())) >= count

    operating.wait_until(lambda: ended(QUEUED // 3), timeout=120, interval=0.5, what="a third")
    operator.kill()  # In the middle of the supersessions.
    operator.start()

    def complete() -> bool:  # Ended, and its chain marked complete (status.next written).
        jobs = _jobs(info, namespace)
        return len(jobs) == len(names) and all(map(_complete, jobs.values()))

    try:
        operating.wait_until(complete, timeout=240, interval=1, what="every chain complete")
    except AssertionError:
        left = {n: j.get("status") for n, j in _jobs(info, namespace).items() if not _complete(j)}
        raise AssertionError(f"not ended: {left}\n{operator.log_text()[-20000:]}") from None
    jobs = sorted(_jobs(info, namespace).values(), key=_ticket)
    *older, newest = jobs
    assert _phase(newest) == "Succeeded", newest["status"]
    tickets = {j["metadata"]["name"]: _ticket(j) for j in jobs}
    for job in older:
        status = job["status"]
        assert (status["phase"], status["reason"]) == ("Cancelled", "Superseded"), status
        successor = status["supersededBy"]
        assert tickets[successor] > _ticket(job), (job["metadata"]["name"], successor)
        assert status["next"][0]["action"] == "stopped"


def test_refuse_ends_a_second_chain_while_one_runs(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    timed = chaining.python_command(TIMED.format(sleep=6))
    agent = chaining.ai_agent("single", timed, triggers=OPENED, concurrency=_per_issue("refuse"))
    chaining.apply(info, namespace, agent)
    _wait_ready(info, namespace, "single")
    [first] = _deliver(operator, namespace, 1, number=9)
    operating.wait_until(
        lambda: _phase(_jobs(info, namespace).get(first, {})) == "Running",
        timeout=60,
        what="running",
    )
    [second] = _deliver(operator, namespace, 1, number=9)
    operating.wait_until(
        lambda: _phase(_jobs(info, namespace).get(second, {})) == "Failed",
        timeout=60,
        what="the second refused",
    )
    status = _jobs(info, namespace)[second]["status"]
    assert status["reason"] == "ConcurrencyLimited", status
    operating.wait_until(
        lambda: _phase(_jobs(info, namespace).get(first, {})) == "Succeeded",
        timeout=60,
        what="first",
    )
    [third] = _deliver(operator, namespace, 1, number=9)  # The slot is free again.
    operating.wait_until(
        lambda: _phase(_jobs(info, namespace).get(third, {})) == "Succeeded",
        timeout=60,
        what="the third to run",
    )


def test_the_namespace_limit_runs_one_job_at_a_time_chains_included(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    """``AGENTCHAIN_MAX_RUNNING_JOBS_PER_NAMESPACE=1``: three two-step chains, six jobs."""
    info = cluster_info
    timed = chaining.python_command(TIMED.format(sleep=0.5))
    first = chaining.agent("first", next_=chaining.step("second"))
    first["spec"]["command"] = timed
    second = chaining.agent("second")
    second["spec"]["command"] = timed
    chaining.apply(info, namespace, first, second)
    saved = dict(operator.extra_env)
    operator.extra_env = {**saved, "AGENTCHAIN_MAX_RUNNING_JOBS_PER_NAMESPACE": "1"}
    operator.kill()
    operator.start()
    try:
        chaining.apply(info, namespace, *(chaining.root_job(f"lim-{i}", "first") for i in range(3)))
        seen_queued = False

        def all_done() -> bool:
            nonlocal seen_queued
            jobs = _jobs(info, namespace)
            seen_queued = seen_queued or any(_phase(j) == "Queued" for j in jobs.values())
            return len(jobs) == 6 and all(_phase(j) == "Succeeded" for j in jobs.values())

        operating.wait_until(all_done, timeout=180, interval=0.5, what="six jobs to succeed")
    finally:
        operator.extra_env = saved
        operator.kill()
        operator.start()
    assert seen_queued
    intervals = sorted(_times(j) for j in _jobs(info, namespace).values())
    for (start, end), (next_start, _) in itertools.pairwise(intervals):
        assert start < end <= next_start, "two jobs of the namespace ran at once"


def _manual(operator: operating.OperatorProcess, body: Obj) -> Obj:
    request = urllib.request.Request(
        f"{operator.url}/api/jobs",
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Authorization": f"Bearer {operator.admin_token}",
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        answer: Obj = json.load(resp)
    return answer


def test_manual_runs_naming_a_group_queue_behind_each_other(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    """An agent without ``concurrency``: the API's ``concurrencyGroup`` (limit 1, queue)."""
    info = cluster_info
    plain = chaining.agent("plain")
    plain["spec"]["command"] = chaining.python_command(TIMED.format(sleep=2))
    chaining.apply(info, namespace, plain)
    run = {"namespace": namespace, "agentRole": "plain", "concurrencyGroup": "deploy prod"}
    first = _manual(operator, {**run, "name": "deploy-1"})["id"]
    operating.wait_until(
        lambda: _phase(_jobs(info, namespace).get(first, {})) == "Running",
        timeout=60,
        what="first runs",
    )
    second = _manual(operator, {**run, "name": "deploy-2"})["id"]
    operating.wait_until(
        lambda: _phase(_jobs(info, namespace)[second]) == "Queued", timeout=30, what="queued"
    )
    assert _jobs(info, namespace)[second]["status"]["reason"] == "Queued"
    operating.wait_until(
        lambda: all(_phase(j) == "Succeeded" for j in _jobs(info, namespace).values()),
        timeout=90,
        what="both to run",
    )
    (a_start, a_end), (b_start, _) = (_times(_jobs(info, namespace)[n]) for n in (first, second))
    assert a_start < a_end <= b_start
