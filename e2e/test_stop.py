"""Stopping jobs and chains on the real control plane (issue 16).

Aspects covered:
- ``POST /api/jobs/{ns}/{name}/stop`` (admin token) ends a running job ``Cancelled``,
  reason ``Stopped``, ``stoppedBy: api`` with the reason given; its pod (and so its
  process) is gone, no child is spawned although its step's condition is ``always``,
  the chain is complete once, with a ``Stopped`` Event; a second stop is a 409; a job
  token may not stop even its own job (403);
- ``kubectl annotate aj X labrats.work/stop=true`` does the same, ``stoppedBy:
  annotation`` with the reason annotation;
- ``POST /api/chains/{ns}/{id}/stop`` stops the chain's running job and its chain;
- a stop sent at the instant the job ends (many jobs, stops at staggered offsets around
  the end) always resolves to exactly one outcome: Succeeded with its one child and no
  ``Stopped`` Event, or Cancelled with no child; never both, never neither;
- a stopped agent gets SIGTERM and the grace period its AiAgent names
  (``terminationGracePeriodSeconds``): its handler runs to the end before the pod goes,
  as ``kubectl logs -f`` followed through the stop shows; a grace period shorter than
  the handler cuts it off.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from e2e import chaining, operating
from e2e.controlplane.cluster import ClusterInfo

Obj = dict[str, Any]


def _post(
    operator: operating.OperatorProcess, path: str, body: Obj | None = None
) -> tuple[int, Obj]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"{operator.url}{path}",
        data=data,
        method="POST",
        headers={
            "Authorization": f"Bearer {operator.admin_token}",
            "Content-Type": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def _pods(info: ClusterInfo, namespace: str, name: str) -> list[Obj]:
    found = operating.get_json(info, "pods", "-n", namespace, "-l", f"labrats.work/agentjob={name}")
    items: list[Obj] = found["items"]
    return items


def _sleeper(info: ClusterInfo, namespace: str, seconds: float = 60) -> None:
    chaining.apply(
        info,
        namespace,
        chaining.agent(
            "sleeper",
            "--no-context",
            "--sleep",
            str(seconds),
            next_=chaining.step("after", "always"),
        ),
        chaining.agent("after", "--no-context"),
    )


def _assert_cancelled_alone(info: ClusterInfo, namespace: str, name: str, by: str, why: str) -> Obj:
    status = chaining.wait_phase(info, namespace, name, "Cancelled", "Succeeded", "Failed")
    assert status["phase"] == "Cancelled", status
    assert status["reason"] == "Stopped" and status["stoppedBy"] == by, status
    assert why in status["message"], status
    operating.wait_until(
        lambda: chaining.job_status(info, namespace, name).get("chainComplete") is True,
        timeout=30,
        what=f"the chain of {name} to complete",
    )
    # The pod is deleted only once the node has seen its container exit.
    operating.wait_until(
        lambda: not _pods(info, namespace, name), timeout=60, what=f"the pod of {name} to go"
    )
    status = chaining.job_status(info, namespace, name)
    jobs = chaining.chain_jobs(info, namespace, status["chainId"])
    assert [j["metadata"]["name"] for j in jobs] == [name], "a stopped job spawned a child"
    assert status["next"][0]["action"] == "stopped", status["next"]
    assert chaining.has_event(info, namespace, name, "Normal", "Stopped")
    completions = [
        e for e in chaining.events_for(info, namespace, name) if e.get("reason") == "ChainComplete"
    ]
    assert len(completions) == 1 and completions[0].get("count", 1) == 1
    return status


def test_a_job_stopped_by_the_api_ends_cancelled_and_spawns_nothing(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    _sleeper(info, namespace)
    chaining.apply(info, namespace, chaining.root_job("nap-1", "sleeper"))
    chaining.wait_phase(info, namespace, "nap-1", "Running")
    token = chaining.job_secret(
        info, namespace, {"status": chaining.job_status(info, namespace, "nap-1")}
    )
    mine = urllib.request.Request(
        f"{operator.url}/api/jobs/{namespace}/nap-1/stop",
        data=b"{}",
        method="POST",
        headers={"Authorization": f"Bearer {token['token']}", "Content-Type": "application/json"},
    )
    try:
        urllib.request.urlopen(mine, timeout=10)
        raise AssertionError("a job token stopped its job")
    except urllib.error.HTTPError as exc:
        assert exc.code == 403

    code, body = _post(operator, f"/api/jobs/{namespace}/nap-1/stop", {"reason": "wrong issue"})
    assert code == 202 and body["stopping"] is True, body
    status = _assert_cancelled_alone(info, namespace, "nap-1", "api", "wrong issue")
    assert "wrong issue" in status["message"]
    code, body = _post(operator, f"/api/jobs/{namespace}/nap-1/stop")
    assert code == 409 and body["phase"] == "Cancelled", body
    code, body = _post(operator, f"/api/jobs/{namespace}/no-such-job/stop")
    assert code == 404, body


def test_a_job_stopped_by_annotation_ends_cancelled(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    _sleeper(info, namespace)
    chaining.apply(info, namespace, chaining.root_job("nap-2", "sleeper"))
    chaining.wait_phase(info, namespace, "nap-2", "Running")
    info.kubectl(
        "annotate",
        "aj",
        "nap-2",
        "-n",
        namespace,
        "labrats.work/stop=true",
        "labrats.work/stop-reason=superseded by hand",
    )
    _assert_cancelled_alone(info, namespace, "nap-2", "annotation", "superseded by hand")


def test_a_chain_stopped_by_the_api_ends_its_running_job(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    _sleeper(info, namespace)
    chaining.apply(info, namespace, chaining.root_job("nap-3", "sleeper"))
    status = chaining.wait_phase(info, namespace, "nap-3", "Running")
    code, body = _post(operator, f"/api/chains/{namespace}/{status['chainId']}/stop", {})
    assert code == 202 and body["stopping"] == ["nap-3"], body
    _assert_cancelled_alone(info, namespace, "nap-3", "api", "Stopped by api")
    code, body = _post(operator, f"/api/chains/{namespace}/no-such-chain/stop", {})
    assert code == 404, body


RACERS = 8


def test_a_stop_at_the_instant_a_job_ends_has_exactly_one_outcome(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    """Each job sleeps 1 s once running; its stop is sent 0 to 1 s after the test sees it
    running (itself a fraction of a second late), so the stops land before, at and after
    the container's end."""
    info = cluster_info
    _sleeper(info, namespace, seconds=1.0)
    names = [f"race-{i}" for i in range(RACERS)]
    chaining.apply(info, namespace, *(chaining.root_job(n, "sleeper") for n in names))

    def stop_later(name: str, offset: float) -> None:
        chaining.wait_phase(info, namespace, name, "Running", "Succeeded")
        time.sleep(offset)
        _post(operator, f"/api/jobs/{namespace}/{name}/stop", {"reason": "race"})

    threads = [threading.Thread(target=stop_later, args=(n, 0.15 * i)) for i, n in enumerate(names)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    outcomes = {}
    for name in names:
        status = chaining.wait_phase(info, namespace, name, "Succeeded", "Cancelled", "Failed")
        operating.wait_until(
            lambda n=name: chaining.job_status(info, namespace, n).get("next"),
            timeout=60,
            what=f"the step after {name}",
        )
        status = chaining.job_status(info, namespace, name)
        jobs = chaining.chain_jobs(info, namespace, status["chainId"])
        stopped_event = chaining.has_event(info, namespace, name, "Normal", "Stopped")
        assert len(status["next"]) == 1, status
        if status["phase"] == "Cancelled":
            assert len(jobs) == 1 and stopped_event, (name, status)
        else:
            assert status["phase"] == "Succeeded", status
            assert len(jobs) == 2 and not stopped_event, (name, status)
            assert status["next"][0]["action"] == "spawned"
        outcomes[name] = status["phase"]
    print("race outcomes:", outcomes)


class _FollowedLogs:
    """``kubectl logs -f`` on a job's pod, as a user watching it would run it: started
    while the pod runs, it prints what the container prints until the container ends,
    including what it prints after the pod's deletion began (the grace period)."""

    def __init__(self, info: ClusterInfo, namespace: str, job: str, out: Path) -> None:
        (pod,) = _pods(info, namespace, job)
        exe = str(info.bin_dir / "kubectl") if info.bin_dir else "kubectl"
        argv = [exe, "--kubeconfig", str(info.kubeconfig), "-n", namespace]
        self.out = out
        with out.open("wb") as sink:
            self.process = subprocess.Popen(
                [*argv, "logs", "-f", pod["metadata"]["name"]],
                stdout=sink,
                stderr=subprocess.STDOUT,
            )

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def ended(self, timeout: float = 60) -> str:
        """All it printed, once the stream ended with the container."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"kubectl logs -f still following: {self.text()!r}") from None
        return self.text()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _winding_agent(name: str, grace: int, handler_seconds: int) -> Obj:
    """An agent that winds down for ``handler_seconds`` on SIGTERM, given ``grace``."""
    trap = (
        f'trap "echo TERM received; sleep {handler_seconds}; echo cleaned up; exit 0" TERM;'
        " echo started; while :; do sleep 0.1; done"
    )
    return chaining.ai_agent(
        name, ["sh", "-c", trap], triggers=chaining.MANUAL, terminationGracePeriodSeconds=grace
    )


def test_a_stopped_agent_gets_sigterm_and_its_grace_period(
    operator: operating.OperatorProcess,
    cluster_info: ClusterInfo,
    namespace: str,
    tmp_path: Path,
) -> None:
    info = cluster_info
    chaining.apply(
        info,
        namespace,
        _winding_agent("graceful", grace=20, handler_seconds=2),
        _winding_agent("hasty", grace=1, handler_seconds=8),
        chaining.root_job("wind-1", "graceful"),
        chaining.root_job("cut-1", "hasty"),
    )
    followed: dict[str, _FollowedLogs] = {}
    try:
        for job in ("wind-1", "cut-1"):
            chaining.wait_phase(info, namespace, job, "Running")
            # Following from before the stop, and only once the stream shows the container's
            # first line, so what the handler prints during the grace period is seen.
            followed[job] = _FollowedLogs(info, namespace, job, tmp_path / f"{job}.log")
            operating.wait_until(
                lambda j=job: "started" in followed[j].text(), timeout=60, what=f"{job} started"
            )
        for job in ("wind-1", "cut-1"):
            code, body = _post(
                operator, f"/api/jobs/{namespace}/{job}/stop", {"reason": "wind down"}
            )
            assert code == 202, body
        for job in ("wind-1", "cut-1"):
            _assert_cancelled_alone(info, namespace, job, "api", "wind down")
        # Each pod went only once its process exited: after the handler's two seconds for
        # the graceful agent; at its one second's SIGKILL, mid-handler, for the hasty one.
        printed = followed["wind-1"].ended()
        assert "TERM received" in printed and "cleaned up" in printed, printed
        printed = followed["cut-1"].ended()
        assert "TERM received" in printed and "cleaned up" not in printed, printed
    finally:
        for logs in followed.values():
            logs.close()
