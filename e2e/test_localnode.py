"""The local node (kubelet stand-in) seen through the real API server, scheduler and kubectl.

Aspects covered:
- env: secretKeyRef, configMapKeyRef, fieldRef, envFrom with a prefix and `$(VAR)` in
  `value` and in `args` reach the process; `$$(VAR)` stays literal.
- logs through the API server (`kubectl logs`): whole log, `--tail=1`, `--limit-bytes`,
  `--follow` ending when the container ends.
- status: a real non-zero exit code and reason Error; a missing command ends as exit code
  127 / ContainerCannotRun.
- init containers run one after another before the main container, each with its log.
- `restartPolicy: OnFailure`: a container that fails once is restarted in place and the
  pod ends Succeeded with restartCount 1.
- deletion: deleting a running pod kills its process and the pod disappears; a Job's
  `activeDeadlineSeconds` (the Job controller deletes the pod) kills the process too.
- a pod's own `activeDeadlineSeconds`: the node kills it, phase Failed, DeadlineExceeded.
- volumes: a Secret's `items` at a `readOnly` mountPath (writes refused), a `subPath`
  file, and an `emptyDir` an init container fills for the main container.
- persistentVolumeClaim: a claim without a class gets the default one and is bound; what
  one pod writes a later pod sees (also through a `subPath`); a `readOnly` mount and a
  claim volume's own `readOnly` refuse writes with EROFS; two claims are two directories,
  and a pod of one cannot read the other's through the node's path (covered);
  a pod whose claim does not exist yet is not scheduled until the claim is bound; deleting
  the claim (once its pod is gone) removes its PersistentVolume and the directory.
- projected: secret items with a mode, a whole configMap, downwardAPI name and labels, a
  service-account token, and the API server's service-account volume; projected and
  configMap volumes are read-only without asking, an emptyDir when asked.

Tests that look at this machine's processes or files need the local node and are skipped
on other clusters (kind); the rest run anywhere.
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

from e2e import operating
from e2e.controlplane.cluster import ClusterInfo

TIMEOUT_SECONDS = 30.0
Pod = dict[str, Any]


@pytest.fixture
def local_only(cluster_info: ClusterInfo) -> None:
    if not cluster_info.local:
        pytest.skip("looks at local processes and files: needs the local node")


def make_pod(name: str, script: str, **spec: Any) -> Pod:
    container: dict[str, Any] = {
        "name": "main",
        "image": "busybox:1.36",
        "command": ["sh", "-c", script],
    }
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"team": "rats"}},
        "spec": {"restartPolicy": "Never", "containers": [container], **spec},
    }


def create(cluster_info: ClusterInfo, namespace: str, body: Pod) -> None:
    cluster_info.kubectl("-n", namespace, "create", "-f", "-", input=json.dumps(body))


def wait_for(
    kube_api: kubernetes.client.ApiClient,
    namespace: str,
    name: str,
    done: Callable[[Any], bool],
) -> Any:
    """Poll the pod until `done(pod)`; return it."""
    core = kubernetes.client.CoreV1Api(kube_api)
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:
        pod = core.read_namespaced_pod(name, namespace)
        if done(pod):
            return pod
        assert time.monotonic() < deadline, f"pod {name} stuck: {pod.status}"
        time.sleep(0.2)


def finished(pod: Any) -> bool:
    return pod.status.phase in ("Succeeded", "Failed")


def terminated_state(pod: Any) -> Any:
    return pod.status.container_statuses[0].state.terminated


def test_env_reaches_the_process_and_logs_flow_through_the_api_server(
    cluster_info: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    cluster_info.kubectl(
        "-n", namespace, "create", "secret", "generic", "creds", "--from-literal=token=s3cr3t"
    )
    cluster_info.kubectl(
        "-n", namespace, "create", "configmap", "settings", "--from-literal=mode=fast"
    )
    env = [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "TEAM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}}},
        {"name": "COMBINED", "value": "$(POD)/$(MODE)/$(CFG_mode)"},
    ]
    container = {
        "env": env,
        "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
        "args": ["$(TOKEN)", "$$(TOKEN)"],
    }
    script = 'echo "arg=$0 literal=$1"; echo "team=$TEAM combined=$COMBINED"; echo last line'
    create(cluster_info, namespace, make_pod("envpod", script, container=container))
    pod = wait_for(kube_api, namespace, "envpod", finished)
    assert pod.status.phase == "Succeeded"

    logs = cluster_info.kubectl("-n", namespace, "logs", "envpod").stdout
    expected = "arg=s3cr3t literal=$(TOKEN)\nteam=rats combined=envpod/fast/fast\nlast line\n"
    assert logs == expected
    tail = cluster_info.kubectl("-n", namespace, "logs", "envpod", "--tail=1").stdout
    assert tail == "last line\n"
    head = cluster_info.kubectl("-n", namespace, "logs", "envpod", "--limit-bytes=10").stdout
    assert head == expected[:10]


def test_follow_streams_until_the_container_ends(
    cluster_info: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    create(cluster_info, namespace, make_pod("slow", "echo one; sleep 2; echo two"))
    wait_for(kube_api, namespace, "slow", lambda p: p.status.phase != "Pending")
    followed = cluster_info.kubectl("-n", namespace, "logs", "-f", "slow", timeout=20).stdout
    assert followed == "one\ntwo\n"


def test_exit_codes_and_a_command_that_cannot_run(
    cluster_info: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    create(cluster_info, namespace, make_pod("fails", "echo oops; exit 3"))
    missing = make_pod("missing", "", container={"command": ["/no/such/binary"]})
    create(cluster_info, namespace, missing)

    failed = terminated_state(wait_for(kube_api, namespace, "fails", finished))
    assert (failed.exit_code, failed.reason) == (3, "Error")
    cannot = wait_for(kube_api, namespace, "missing", finished)
    assert cannot.status.phase == "Failed"
    state = terminated_state(cannot)
    assert (state.exit_code, state.reason) == (127, "ContainerCannotRun")
    assert "/no/such/binary" in state.message


def test_init_containers_run_first_in_order(
    cluster_info: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    body = make_pod("inits", "echo main")
    body["spec"]["initContainers"] = [
        {"name": f"init{i}", "image": "busybox:1.36", "command": ["sh", "-c", f"echo init{i}"]}
        for i in (1, 2)
    ]
    create(cluster_info, namespace, body)

    pod = wait_for(kube_api, namespace, "inits", finished)
    assert pod.status.phase == "Succeeded"
    inits = pod.status.init_container_statuses
    assert [s.state.terminated.exit_code for s in inits] == [0, 0]
    assert inits[0].state.terminated.finished_at <= inits[1].state.terminated.started_at
    logs = [
        cluster_info.kubectl("-n", namespace, "logs", "inits", "-c", name).stdout
        for name in ("init1", "init2", "main")
    ]
    assert logs == ["init1\n", "init2\n", "main\n"]


def test_volumes_secret_items_read_only_sub_path_and_a_shared_empty_dir(
    cluster_info: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    cluster_info.kubectl(
        "-n", namespace, "create", "secret", "generic", "files",
        "--from-literal=prompt=$(TOKEN) as written", "--from-literal=other=x",
    )  # fmt: skip
    base = f"/tmp/{namespace}"  # Mount points are created on the node: keep them in /tmp.
    mounts = [
        {"name": "files", "mountPath": f"{base}/files", "readOnly": True},
        {"name": "scratch", "mountPath": f"{base}/scratch"},
        {"name": "files", "mountPath": f"{base}/one/p", "subPath": "p"},
    ]
    items = [{"key": "prompt", "path": "p"}]
    body = make_pod(
        "vols",
        f"ls {base}/files; cat {base}/files/p; echo; cat {base}/scratch/note; cat {base}/one/p;"
        f" echo; touch {base}/files/new 2>/dev/null || echo read-only",
        container={"volumeMounts": mounts},
        volumes=[
            {"name": "files", "secret": {"secretName": "files", "items": items}},
            {"name": "scratch", "emptyDir": {}},
        ],
    )  # fmt: skip
    body["spec"]["initContainers"] = [
        {
            "name": "writer",
            "image": "busybox:1.36",
            "command": ["sh", "-c", f"echo from-init > {base}/scratch/note"],
            "volumeMounts": [{"name": "scratch", "mountPath": f"{base}/scratch"}],
        }
    ]
    create(cluster_info, namespace, body)

    pod = wait_for(kube_api, namespace, "vols", finished)
    assert pod.status.phase == "Succeeded"
    logs = cluster_info.kubectl("-n", namespace, "logs", "vols").stdout
    written = "$(TOKEN) as written"
    assert logs == f"p\n{written}\nfrom-init\n{written}\nread-only\n"


@pytest.mark.usefixtures("local_only")
def test_on_failure_restarts_in_place(
    cluster_info: ClusterInfo,
    namespace: str,
    kube_api: kubernetes.client.ApiClient,
    tmp_path: Path,
) -> None:
    script = "if [ -f marker ]; then echo second; exit 0; fi; touch marker; echo first; exit 1"
    body = make_pod("flaky", script, container={"workingDir": str(tmp_path / "work")})
    body["spec"]["restartPolicy"] = "OnFailure"
    create(cluster_info, namespace, body)

    pod = wait_for(kube_api, namespace, "flaky", finished)
    assert pod.status.phase == "Succeeded"
    status = pod.status.container_statuses[0]
    assert status.restart_count == 1
    assert status.last_state.terminated.exit_code == 1
    assert (tmp_path / "work" / "marker").exists()


@pytest.mark.usefixtures("local_only")
def test_deleting_a_running_pod_kills_its_process(
    cluster_info: ClusterInfo,
    namespace: str,
    kube_api: kubernetes.client.ApiClient,
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    # `$$$$` is the shell's `$$` once Kubernetes has unescaped `$$` to `$`.
    script = f"echo $$$$ > {pid_file}; exec sleep 300"
    create(cluster_info, namespace, make_pod("sleeper", script))
    wait_for(kube_api, namespace, "sleeper", lambda p: p.status.phase == "Running")
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    pid = int(pid_file.read_text())

    cluster_info.kubectl("-n", namespace, "delete", "pod", "sleeper", "--wait=true")
    assert not process_alive(pid)


@pytest.mark.usefixtures("local_only")
def test_pod_active_deadline_is_enforced_by_the_node(
    cluster_info: ClusterInfo,
    namespace: str,
    kube_api: kubernetes.client.ApiClient,
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    body = make_pod("late", f"echo $$$$ > {pid_file}; exec sleep 60", activeDeadlineSeconds=1)
    create(cluster_info, namespace, body)

    pod = wait_for(kube_api, namespace, "late", finished)
    assert (pod.status.phase, pod.status.reason) == ("Failed", "DeadlineExceeded")
    assert not process_alive(int(pid_file.read_text()))


@pytest.mark.usefixtures("local_only")
def test_job_deadline_deletes_the_pod_and_its_process(
    cluster_info: ClusterInfo, namespace: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    template = make_pod("unused", f"echo $$$$ > {pid_file}; exec sleep 60")
    template = {"spec": template["spec"]}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "slowjob"},
        "spec": {
            "activeDeadlineSeconds": 2,
            "backoffLimit": 0,
            "template": template,
        },
    }
    create(cluster_info, namespace, job)
    cluster_info.kubectl(
        "-n", namespace, "wait", "job/slowjob", "--for=condition=Failed", "--timeout=30s"
    )
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while process_alive(int(pid_file.read_text())):
        assert time.monotonic() < deadline, "the Job's process outlived its deadline"
        time.sleep(0.1)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers signal 0; it is dead for our purpose.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ")[-1][:1] != "Z"


# --- persistent volume claims and projected volumes -------------------------------------------

READ_ONLY = "Read-only file system"


def make_claim(name: str, **spec: Any) -> dict[str, Any]:
    """A claim of the default StorageClass (no storageClassName), as the product makes."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "64Mi"}},
            **spec,
        },
    }


def claim_pod(name: str, script: str, mounts: list[Pod], volumes: list[Pod]) -> Pod:
    return make_pod(name, script, container={"volumeMounts": mounts}, volumes=volumes)


def claim_volume(name: str, claim: str, read_only: bool = False) -> Pod:
    return {"name": name, "persistentVolumeClaim": {"claimName": claim, "readOnly": read_only}}


def wait_bound(kube_api: kubernetes.client.ApiClient, namespace: str, claim: str) -> Any:
    core: Any = kubernetes.client.CoreV1Api(kube_api)  # its models' fields are Optional
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while (
        found := core.read_namespaced_persistent_volume_claim(claim, namespace)
    ).status.phase != "Bound":
        assert time.monotonic() < deadline, f"claim {claim} never bound: {found.status}"
        time.sleep(0.2)
    return found


def run_to_end(
    cluster_info: ClusterInfo, kube_api: kubernetes.client.ApiClient, namespace: str, body: Pod
) -> str:
    """Create the pod, wait until it succeeded, and return its log."""
    name = body["metadata"]["name"]
    create(cluster_info, namespace, body)
    pod = wait_for(kube_api, namespace, name, finished)
    logs = cluster_info.kubectl("-n", namespace, "logs", name).stdout
    assert pod.status.phase == "Succeeded", logs
    return logs


def test_a_claim_is_bound_and_what_one_pod_writes_the_next_sees_read_only_too(
    cluster_info: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    create(cluster_info, namespace, make_claim("ws"))
    claim = wait_bound(kube_api, namespace, "ws")
    if cluster_info.local:
        assert claim.spec.storage_class_name == "agentchain-local"  # the default class
        events = cluster_info.kubectl(
            "-n", namespace, "get", "events", "--field-selector=involvedObject.name=ws",
            "-o", "jsonpath={.items[*].reason}",
        ).stdout  # fmt: skip
        assert "ProvisioningSucceeded" in events.split()
    base = f"/tmp/{namespace}"
    script = f"mkdir -p {base}/ws/src && echo from-writer > {base}/ws/src/note && echo ok"
    writer = claim_pod(
        "writer", script, [{"name": "w", "mountPath": f"{base}/ws"}], [claim_volume("w", "ws")]
    )
    assert run_to_end(cluster_info, kube_api, namespace, writer) == "ok\n"

    # Later: one mount of a subPath read-only, one of a claim volume read-only itself.
    mounts: list[Pod] = [
        {"name": "w", "mountPath": f"{base}/src", "subPath": "src", "readOnly": True},
        {"name": "r", "mountPath": f"{base}/all"},
    ]
    script = (
        f"cat {base}/src/note; cat {base}/all/src/note;"
        f" (echo x > {base}/src/new) 2>&1 | grep -o '{READ_ONLY}';"
        f" (echo x > {base}/all/new) 2>&1 | grep -o '{READ_ONLY}'; ls {base}/all"
    )
    volumes = [claim_volume("w", "ws"), claim_volume("r", "ws", read_only=True)]
    reader = claim_pod("reader", script, mounts, volumes)
    logs = run_to_end(cluster_info, kube_api, namespace, reader)
    assert logs == f"from-writer\nfrom-writer\n{READ_ONLY}\n{READ_ONLY}\nsrc\n"


def test_two_claims_are_isolated(
    cluster_info: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    for name in ("one", "two"):
        create(cluster_info, namespace, make_claim(name))
    bound = {
        name: wait_bound(kube_api, namespace, name).spec.volume_name for name in ("one", "two")
    }
    assert bound["one"] != bound["two"]
    base = f"/tmp/{namespace}"
    for name in ("one", "two"):
        script = f"echo {name} > {base}/v/{name}; ls {base}/v"
        body = claim_pod(
            f"pod-{name}",
            script,
            [{"name": "v", "mountPath": f"{base}/v"}],
            [claim_volume("v", name)],
        )
        assert run_to_end(cluster_info, kube_api, namespace, body) == f"{name}\n"
    if not cluster_info.local:
        return
    # Nor through the node's path of the other volume: it is covered in the pod's view.
    core: Any = kubernetes.client.CoreV1Api(kube_api)
    other = core.read_persistent_volume(bound["one"]).spec.host_path.path
    assert Path(other, "one").read_text() == "one\n"  # on the node
    script = f"cat {other}/one 2>/dev/null || echo hidden; ls {base}/v"
    body = claim_pod(
        "peek", script, [{"name": "v", "mountPath": f"{base}/v"}], [claim_volume("v", "two")]
    )
    assert run_to_end(cluster_info, kube_api, namespace, body) == "hidden\ntwo\n"


def test_a_pod_waits_for_its_claim_then_runs(
    cluster_info: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    base = f"/tmp/{namespace}"
    body = claim_pod(
        "patient", f"ls -a {base}/v | wc -l", [{"name": "v", "mountPath": f"{base}/v"}],
        [claim_volume("v", "later")],
    )  # fmt: skip
    create(cluster_info, namespace, body)
    core: Any = kubernetes.client.CoreV1Api(kube_api)  # its models' fields are Optional

    def unscheduled() -> bool:
        pod = core.read_namespaced_pod("patient", namespace)
        assert pod.status.phase == "Pending" and not pod.spec.node_name  # not scheduled
        return True

    operating.stays(unscheduled, seconds=3, what="the pod without its claim unscheduled")

    create(cluster_info, namespace, make_claim("later"))
    pod = wait_for(kube_api, namespace, "patient", finished)
    assert pod.status.phase == "Succeeded"
    assert cluster_info.kubectl("-n", namespace, "logs", "patient").stdout.strip() == "2"


@pytest.mark.usefixtures("local_only")
def test_deleting_a_claim_removes_its_volume_and_directory(
    cluster_info: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    create(cluster_info, namespace, make_claim("gone"))
    volume_name = wait_bound(kube_api, namespace, "gone").spec.volume_name
    core: Any = kubernetes.client.CoreV1Api(kube_api)  # its models' fields are Optional
    volume = core.read_persistent_volume(volume_name)
    assert volume.spec.persistent_volume_reclaim_policy == "Delete"
    directory = Path(volume.spec.host_path.path)
    assert directory.is_dir() and directory.parent == cluster_info.workdir / "volumes"
    base = f"/tmp/{namespace}"
    body = claim_pod(
        "filler", f"echo data > {base}/v/f", [{"name": "v", "mountPath": f"{base}/v"}],
        [claim_volume("v", "gone")],
    )  # fmt: skip
    run_to_end(cluster_info, kube_api, namespace, body)
    assert (directory / "f").read_text() == "data\n"

    # Even a finished pod holds its claim (pvc-protection) until the pod is deleted.
    cluster_info.kubectl("-n", namespace, "delete", "pod", "filler", "--wait=true")
    cluster_info.kubectl("-n", namespace, "delete", "pvc", "gone", "--wait=true")
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while directory.exists() or volume_name in {
        v.metadata.name for v in core.list_persistent_volume().items
    }:
        assert time.monotonic() < deadline, "the released volume was not reclaimed"
        time.sleep(0.2)


def test_projected_volume_and_read_only_mounts_of_every_kind(
    cluster_info: ClusterInfo, namespace: str, kube_api: kubernetes.client.ApiClient
) -> None:
    cluster_info.kubectl("-n", namespace, "create", "secret", "generic", "s", "--from-literal=k=sv")
    cluster_info.kubectl("-n", namespace, "create", "configmap", "c", "--from-literal=k=cv")
    sources = [
        {"secret": {"name": "s", "items": [{"key": "k", "path": "secret/k", "mode": 0o600}]}},
        {"configMap": {"name": "c"}},
        {"downwardAPI": {"items": [
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        ]}},
        {"serviceAccountToken": {"path": "token", "audience": "agentchain-test"}},
    ]  # fmt: skip
    base = f"/tmp/{namespace}"
    mounts: list[Pod] = [
        {"name": "p", "mountPath": f"{base}/p"},  # not readOnly: projected is anyway
        {"name": "scratch", "mountPath": f"{base}/ro", "readOnly": True},
        {"name": "c", "mountPath": f"{base}/c"},
    ]
    script = (
        f"cd {base}/p; cat secret/k; echo; cat k; echo; cat name; echo; cat labels; echo;"
        f" stat -c %a secret/k; test -s token && echo token;"
        f" cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo;"
        f" for d in p ro c; do (echo x > {base}/$d/new) 2>&1 | grep -o '{READ_ONLY}'; done"
    )
    volumes = [
        {"name": "p", "projected": {"sources": sources}},
        {"name": "scratch", "emptyDir": {}},
        {"name": "c", "configMap": {"name": "c"}},
    ]
    logs = run_to_end(cluster_info, kube_api, namespace, claim_pod("proj", script, mounts, volumes))
    expected = ["sv", "cv", "proj", 'team="rats"', "600", "token", namespace, *[READ_ONLY] * 3]
    assert logs.splitlines() == expected
