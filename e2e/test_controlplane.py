"""The local control plane behaves like a real cluster where agentchain relies on it.

Aspects covered (issue 3, "Done when"):
* a failing batch Job ends Failed, its pod reports the real exit code, and its output
  comes back through the API server (``kubectl logs job/...``);
* ``activeDeadlineSeconds`` is enforced by the Job controller and the pod goes;
* the garbage collector deletes a Job whose owner is deleted;
* no process started by a cluster outlives its context (components and pods alike):
  ``realnode``, as it starts a cluster and a real node of its own.

Jobs are written as kind would need them (an image is named: the session's agent image
on the real node, which pulls from no registry) so the same tests run on the real node and
on a cluster given by KUBECONFIG.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from e2e import realnodes
from e2e.controlplane.cluster import ClusterInfo, cluster

IMAGE = "busybox:1.36"
TIMEOUT_SECONDS = 90.0


def job_manifest(
    name: str, script: str, image: str = IMAGE, pod: dict[str, Any] | None = None, **spec: Any
) -> str:
    """A Job running ``script`` in ``image``; ``pod`` adds fields to its pod's spec."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            **spec,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": image, "command": ["sh", "-c", script]}
                    ],
                    **(pod or {}),
                }
            },
        },
    }
    return json.dumps(job)


def eventually(check: Callable[[], bool], what: str, timeout: float = TIMEOUT_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting until {what}")
        time.sleep(0.2)


def process_gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    # A zombie has exited; only its parent has not collected the status yet.
    return stat.rpartition(")")[2].split()[0] == "Z"


def image_for(info: ClusterInfo) -> str:
    """The image a test Job runs: the session's agent image where the node has one (the
    real node, which pulls from no registry), else busybox (kind)."""
    return info.agent_image or IMAGE


def job_pods(info: ClusterInfo, namespace: str, job: str) -> list[dict[str, Any]]:
    out = info.kubectl("get", "pods", "-n", namespace, "-l", f"job-name={job}", "-o", "json")
    pods: list[dict[str, Any]] = json.loads(out.stdout)["items"]
    return pods


def job_pod(info: ClusterInfo, namespace: str, job: str) -> dict[str, Any]:
    pods = job_pods(info, namespace, job)
    assert len(pods) == 1, pods
    return pods[0]


def test_failed_job_reports_exit_code_and_logs_through_the_api_server(
    cluster_info: ClusterInfo, kube_api: kubernetes.client.ApiClient, namespace: str
) -> None:
    manifest = job_manifest("fails", "echo hello from job; exit 3", image_for(cluster_info))
    cluster_info.kubectl("apply", "-n", namespace, "-f", "-", input=manifest)

    cluster_info.kubectl(
        "wait", "-n", namespace, "--for=condition=Failed", "job/fails", "--timeout=90s",
        timeout=TIMEOUT_SECONDS + 10,
    )  # fmt: skip

    terminated = job_pod(cluster_info, namespace, "fails")["status"]["containerStatuses"][0]
    assert terminated["state"]["terminated"]["exitCode"] == 3
    logs = cluster_info.kubectl("logs", "-n", namespace, "job/fails")
    assert logs.stdout.strip() == "hello from job"


def test_active_deadline_fails_the_job_and_kills_its_process(
    cluster_info: ClusterInfo, kube_api: kubernetes.client.ApiClient, namespace: str
) -> None:
    script = "exec sleep 60"
    # A short grace period: sleep, as a container's process 1, ignores the SIGTERM.
    manifest = job_manifest(
        "deadline",
        script,
        image_for(cluster_info),
        pod={"terminationGracePeriodSeconds": 1},
        activeDeadlineSeconds=2,
        # Room for the failed pod the deadline leaves: the Job controller judges the backoff
        # limit before the deadline, so with 0 a sync that counts that pod before the
        # deadline's FailureTarget is stored reports BackoffLimitExceeded (seen under load).
        backoffLimit=6,
    )
    cluster_info.kubectl("apply", "-n", namespace, "-f", "-", input=manifest)

    cluster_info.kubectl(
        "wait", "-n", namespace, "--for=condition=Failed", "job/deadline", "--timeout=90s",
        timeout=TIMEOUT_SECONDS + 10,
    )  # fmt: skip

    job = json.loads(
        cluster_info.kubectl("get", "-n", namespace, "job/deadline", "-o", "json").stdout
    )
    failed = [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
    assert failed[0]["reason"] == "DeadlineExceeded"
    # The Job controller deletes the running pod; a node removes it once its container
    # has ended, so the pod's going is the process's end as a user sees it.
    eventually(
        lambda: not job_pods(cluster_info, namespace, "deadline"), "the pod is gone", timeout=30
    )


def test_deleting_the_owner_garbage_collects_the_job(
    kube_api: kubernetes.client.ApiClient, namespace: str
) -> None:
    core, batch = kubernetes.client.CoreV1Api(kube_api), kubernetes.client.BatchV1Api(kube_api)
    owner = core.create_namespaced_config_map(
        namespace,
        kubernetes.client.V1ConfigMap(metadata=kubernetes.client.V1ObjectMeta(name="owner")),
    )
    assert owner.metadata is not None
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner.metadata.uid,
    }
    job = json.loads(job_manifest("owned", "true", suspend=True))
    job["metadata"]["ownerReferences"] = [reference]
    batch.create_namespaced_job(namespace, job)

    core.delete_namespaced_config_map("owner", namespace)

    def job_gone() -> bool:
        try:
            batch.read_namespaced_job("owned", namespace)
        except kubernetes.client.ApiException as error:
            return bool(error.status == 404)
        return False

    eventually(job_gone, "the garbage collector deleted job/owned")


def parents() -> dict[int, int]:
    """pid -> parent pid of every live process."""
    table: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue  # exited while we looked
            table[int(entry.name)] = int(fields[1])
    return table


def descendants(roots: set[int]) -> set[int]:
    """``roots`` and every live process whose parent chain leads to one of them."""
    table = parents()
    found, frontier = set(roots), set(roots)
    while frontier:
        frontier = {pid for pid, parent in table.items() if parent in frontier} - found
        found |= frontier
    return found


def children(pid: int) -> set[int]:
    return {child for child, parent in parents().items() if parent == pid}


def start_sleeping_pod(info: ClusterInfo, image: str) -> None:
    info.kubectl("create", "namespace", "orphans")
    manifest = job_manifest("sleeper", "sleep 300", image, pod={"terminationGracePeriodSeconds": 1})
    info.kubectl("apply", "-n", "orphans", "-f", "-", input=manifest)
    info.kubectl(
        "wait", "-n", "orphans", "--for=jsonpath={.status.ready}=1", "job/sleeper",
        "--timeout=90s", timeout=TIMEOUT_SECONDS + 10,
    )  # fmt: skip


@pytest.mark.realnode
def test_no_process_outlives_the_cluster_context(tmp_path: Path) -> None:
    realnodes.skip_on_an_existing_cluster()
    # Only processes under children started by this context count.
    earlier = children(os.getpid())
    with cluster(tmp_path) as info:
        assert info.real_node is not None
        # A pod's process must go too, not only the components'.
        start_sleeping_pod(info, info.real_node.test_image)
        started = descendants(children(os.getpid()) - earlier)
        assert started, "the cluster started no process"

    left = {pid for pid in started if not process_gone(pid)}
    assert not left, f"processes outlived the cluster: {sorted(left)}"
