"""agentchain installed as a user installs it: ``helm install`` from ``charts/`` on the
real node, with the image built from the repository's Dockerfile.

The release runs two operator replicas and the chart's Redis, with the chart's
NetworkPolicy on (enforced by the node's kube-router), and the agents' namespace carries
the PodSecurity ``restricted`` labels. The checks are what a user would see:

* the operator pods run as a non-root user with a read-only root filesystem, read from
  the pods' status and spec, and ``kubectl exec ... touch`` on the root filesystem fails;
* a pod in the agents' namespace reaches the operator's Service but not the chart's
  Redis, while the operator does reach Redis;
* a signed delivery sent through the chart's Service (``kubectl port-forward``, as a
  user would try it before exposing it) is accepted and creates the root AgentJob;
* the chain's agents run under the egress policy the operator keeps for each AiAgent,
  and still reach the job API through the Service.

Images: the operator image from ``operator_image.py`` (the Dockerfile, no registry); the
chart's Redis from ``realnode_redis.py`` (Debian's redis-server, since no registry can
be reached); the agents' test pod from the node's busybox image. All imported into the
node's containerd, with ``imagePullPolicy: Never``.

Marked ``realnode`` (``make realnode``). One cluster and one release for the module: a
real node, an image import and a release take most of the time.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import chaining, delivering
from e2e.controlplane import operator_image, realnode_images, realnode_redis
from e2e.controlplane.cluster import (
    ClusterInfo,
    cluster,
    existing_kubeconfig,
    finish_workdir,
    make_workdir,
)
from e2e.controlplane.realnode_host import HostState

pytestmark = pytest.mark.realnode

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "agentchain"
SAMPLE = ROOT / "config" / "samples" / "labrats.work_v1alpha1_aiagent_issue-fix-review.yaml"
RELEASE = "agentchain"
SYSTEM = "agentchain-system"
AGENTS = "agents"
SECRET = "chart-install-webhook-secret"
INSTALL_TIMEOUT = "300s"
WAIT_SECONDS = 120.0
# busybox nc: -w bounds the connect, so a dropped SYN fails the probe in that time.
CONNECT_SECONDS = 3
CHAIN_SECONDS = 240.0


@dataclass(frozen=True)
class Release:
    info: ClusterInfo
    operator_pods: list[Obj]
    redis_ip: str
    operator_ip: str
    test_image: str
    operator_image: str
    seconds: dict[str, float]


def _helm() -> Path:
    result = subprocess.run(
        ["bash", str(ROOT / "e2e" / "controlplane" / "build-binaries.sh"), "helm"],
        stdout=subprocess.PIPE, text=True, check=True,
    )  # fmt: skip
    return Path(result.stdout.strip().splitlines()[-1].split(":")[2]) / "helm"


def _repository_and_tag(ref: str) -> tuple[str, str]:
    repository, _sep, tag = ref.rpartition(":")
    return repository, tag


def values(operator_ref: str, redis_ref: str) -> Obj:
    """The release's values: the locally built images, two replicas, the chart's Redis
    (an emptyDir: the point here is the network and the security context, not the
    provisioner), NetworkPolicy on, one namespace served."""
    repository, tag = _repository_and_tag(operator_ref)
    redis_repository, redis_tag = _repository_and_tag(redis_ref)
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "replicas": 2,
        "operator": {"namespaces": [AGENTS]},
        "webhook": {"secrets": [SECRET]},
        # The agents' egress policies too (the chart's default). This node's DNS is
        # CoreDNS as a host process, not a pod: port 53 to any address.
        "networkPolicy": {"enabled": True, "agentEgress": {"enabled": True, "dnsNamespace": ""}},
        "redis": {
            "enabled": True,
            "image": {"repository": redis_repository, "tag": redis_tag, "pullPolicy": "Never"},
            "persistence": {"enabled": False},
        },
    }


def _json(info: ClusterInfo, *args: str) -> Obj:
    out: Obj = json.loads(info.kubectl(*args, "-o", "json").stdout)
    return out


def _wait(what: str, check: Any, timeout: float = WAIT_SECONDS) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout:.0f}s: {what}")
        time.sleep(0.5)


def _agent_probe_pod(image: str) -> Obj:
    """A pod that passes PodSecurity ``restricted``: non-root, no privilege escalation,
    no capabilities, the runtime's seccomp profile."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": AGENTS},
        "spec": {
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "securityContext": {
                "runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [{
                "name": "main", "image": image, "imagePullPolicy": "Never",
                "command": ["sleep", "3600"],
                "securityContext": {
                    "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                },
            }],
        },
    }  # fmt: skip


def _service_ip(info: ClusterInfo, port: int) -> str:
    services = _json(info, "get", "services", "-n", SYSTEM)["items"]
    (ip,) = [
        s["spec"]["clusterIP"]
        for s in services
        if any(p["port"] == port for p in s["spec"]["ports"])
        and "internal" not in s["metadata"]["name"]
    ]
    return str(ip)


def _operator_pods(info: ClusterInfo) -> list[Obj]:
    selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=operator"
    pods: list[Obj] = _json(info, "get", "pods", "-n", SYSTEM, "-l", selector)["items"]
    return pods


@pytest.fixture(scope="module")
def release() -> Iterator[Release]:
    if existing_kubeconfig() is not None:
        pytest.skip("the real node is part of the local cluster only")
    seconds: dict[str, float] = {}
    started = time.monotonic()
    built = operator_image.build(ROOT)
    redis = realnode_redis.redis_image()
    seconds["images"] = time.monotonic() - started
    before = HostState.capture()
    workdir = make_workdir()
    # A copy of its own: the cache keeps one operator archive, and a build of other
    # sources (another checkout on the machine) deletes this one.
    archive = workdir / built.archive.name
    shutil.copyfile(built.archive, archive)
    succeeded = False
    try:
        started = time.monotonic()
        with cluster(workdir) as info:
            node = info.real_node
            assert node is not None
            seconds["cluster"] = time.monotonic() - started
            started = time.monotonic()
            for image in (realnode_images.Image(built.ref, archive), redis):
                realnode_images.import_image(Path("ctr"), node.paths.containerd_socket, image)
            seconds["import"] = time.monotonic() - started
            info.kubectl("create", "namespace", AGENTS)
            info.kubectl(
                "label", "namespace", AGENTS, "pod-security.kubernetes.io/enforce=restricted",
                "pod-security.kubernetes.io/warn=restricted",
            )  # fmt: skip
            values_file = workdir / "values.yaml"
            values_file.write_text(yaml.safe_dump(values(built.ref, redis.ref)))
            started = time.monotonic()
            install = subprocess.run(
                [str(_helm()), "install", RELEASE, str(CHART), "--namespace", SYSTEM,
                 "--create-namespace", "--kubeconfig", str(info.kubeconfig),
                 "--values", str(values_file), "--wait", "--timeout", INSTALL_TIMEOUT],
                capture_output=True, text=True, check=False, timeout=400,
            )  # fmt: skip
            seconds["helm install"] = time.monotonic() - started
            if install.returncode != 0:
                pods = info.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
                events = info.kubectl("get", "events", "-n", SYSTEM, check=False).stdout
                pytest.fail(f"helm install failed: {install.stderr}\n{pods}\n{events}")
            info.kubectl("apply", "-n", AGENTS, "-f", str(SAMPLE))
            yield Release(
                info,
                _operator_pods(info),
                _service_ip(info, 6379),
                _service_ip(info, 8080),
                node.test_image,
                built.ref,
                seconds,
            )
            print(f"\n[chart-install] seconds: {json.dumps(seconds)}")
        succeeded = True
    finally:
        finish_workdir(workdir, succeeded)
    # The release's pods, volumes, policies' chains and ipsets are gone with the node.
    assert before.differences(HostState.capture()) == {}


def test_operator_pods_run_non_root_with_a_read_only_root_filesystem(release: Release) -> None:
    info = release.info
    assert len(release.operator_pods) == 2, [p["metadata"]["name"] for p in release.operator_pods]
    for pod in release.operator_pods:
        name = pod["metadata"]["name"]
        assert pod["status"]["phase"] == "Running", pod["status"]
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        (container,) = pod["spec"]["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        # What the process actually is, from inside: not uid 0, and / cannot be written.
        uid = info.kubectl("exec", "-n", SYSTEM, name, "--", "id", "-u").stdout.strip()
        assert uid == "10001", uid
        touch = info.kubectl("exec", "-n", SYSTEM, name, "--", "touch", "/x", check=False)
        assert touch.returncode != 0
        assert "Read-only file system" in touch.stderr, touch.stderr
        # Its /tmp emptyDir is writable: the failure above is the root filesystem's.
        info.kubectl("exec", "-n", SYSTEM, name, "--", "touch", "/tmp/x")


def _reaches(info: ClusterInfo, namespace: str, pod: str, argv: list[str]) -> str:
    result = info.kubectl("exec", "-n", namespace, pod, "--", *argv, check=False)
    return result.stdout


def test_an_agent_pod_cannot_reach_redis_while_the_operator_can(release: Release) -> None:
    info = release.info
    info.kubectl("apply", "-f", "-", input=json.dumps(_agent_probe_pod(release.test_image)))
    _wait(
        "the probe pod to run",
        lambda: (
            _json(info, "get", "pod", "probe", "-n", AGENTS)["status"].get("phase") == "Running"
        ),
    )
    nc = ["sh", "-c"]
    # The agent's network works: the operator's public port answers it (agents use the
    # job API through it). Polled: the policy engine writes a new pod's rules within a
    # second or two of its start, and a connection made meanwhile may get no answer.
    health = f"printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' | nc -w {CONNECT_SECONDS} "
    health += f"{release.operator_ip} 8080"
    _wait(
        "the operator's Service to answer the agent pod",
        lambda: "200 OK" in _reaches(info, AGENTS, "probe", [*nc, health]),
        timeout=60,
    )
    # Redis, by its Service address, does not: the chart's policy admits the operator only.
    ping = f"printf 'PING\\r\\n' | nc -w {CONNECT_SECONDS} {release.redis_ip} 6379"
    assert _reaches(info, AGENTS, "probe", [*nc, ping]) == ""
    # The operator reaches the same address and port, and Redis answers it.
    probe = (
        f"import socket; s = socket.create_connection(({release.redis_ip!r}, 6379), timeout=5); "
        "s.sendall(b'PING\\r\\n'); print(s.recv(100).decode())"
    )
    operator = release.operator_pods[0]["metadata"]["name"]
    answer = _reaches(info, SYSTEM, operator, ["python", "-c", probe])
    assert answer.startswith("-NOAUTH"), answer


@pytest.fixture
def forwarded(release: Release) -> Iterator[str]:
    """The chart's Service on a local port (``kubectl port-forward``)."""
    info = release.info
    argv = [
        str(info.bin_dir / "kubectl") if info.bin_dir else "kubectl",
        "--kubeconfig", str(info.kubeconfig), "port-forward", "-n", SYSTEM,
        f"service/{RELEASE}", ":8080",
    ]  # fmt: skip
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            match = re.search(r"127\.0\.0\.1:(\d+)", line)
            assert match, (line, proc.stderr.read() if proc.stderr else "")
            yield f"http://127.0.0.1:{match.group(1)}"
        finally:
            proc.terminate()


def test_a_signed_delivery_through_the_service_creates_the_root_agentjob(
    release: Release, forwarded: str
) -> None:
    info = release.info

    def delivered() -> list[Obj]:
        # The webhook matches against a listing of the agents up to seconds old: a
        # delivery before the sample's agents are listed creates nothing, so send fresh
        # ones until one names a job in the agents' namespace.
        body, headers = delivering.signed(SECRET, delivering.issue_opened())
        status, answer = delivering.post(forwarded, body, headers)
        assert status == 202, (status, answer)
        return [j for j in answer.get("jobs", []) if j["namespace"] == AGENTS]

    (job,) = _wait("a delivery to name a job in the agents' namespace", delivered)
    assert job["agent"] == "ai-triage", job
    root = _wait(
        f"AgentJob {job['name']}",
        lambda: _json(info, "get", "agentjobs", "-n", AGENTS)["items"],
    )
    assert [j["metadata"]["name"] for j in root] == [job["name"]]


def test_the_chain_runs_in_real_containers_under_podsecurity_restricted(
    release: Release, forwarded: str
) -> None:
    """Seed 003's three agents, each in a container of the operator image (its demo
    agent, the chart's default), admitted in the ``restricted`` namespace."""
    info = release.info
    before = {j["metadata"]["name"] for j in _json(info, "get", "agentjobs", "-n", AGENTS)["items"]}
    body, headers = delivering.signed(SECRET, delivering.issue_opened(number=7))
    status, answer = delivering.post(forwarded, body, headers)
    assert status == 202, (status, answer)
    (job,) = [j for j in answer["jobs"] if j["namespace"] == AGENTS]
    assert job["name"] not in before
    jobs = chaining.wait_chain(info, AGENTS, job["name"], 3, timeout=CHAIN_SECONDS)
    assert [j["status"]["phase"] for j in jobs] == ["Succeeded"] * 3, [j["status"] for j in jobs]
    pods = _json(info, "get", "pods", "-n", AGENTS, "-l", "batch.kubernetes.io/job-name")["items"]
    images = {c["image"] for p in pods for c in p["spec"]["containers"]}
    assert images == {release.operator_image}, images
    # ...each under its agent's egress policy, which still lets it reach the job API.
    agents = {a["metadata"]["name"] for a in _json(info, "get", "aiagents", "-n", AGENTS)["items"]}
    policies = _json(info, "get", "networkpolicies", "-n", AGENTS)["items"]
    assert {p["metadata"]["name"] for p in policies} == {f"agentchain-egress-{a}" for a in agents}


def test_a_leader_deleted_mid_chain_fails_over_with_nothing_lost_or_doubled(
    release: Release, forwarded: str
) -> None:
    """The pod holding the release's Lease is deleted (as a node drain or a user would)
    while the chain's root runs; the other replica takes over and the chain ends with
    its three jobs, each run by exactly one batch Job."""
    info = release.info
    leader = _json(info, "get", "lease", RELEASE, "-n", SYSTEM)["spec"]["holderIdentity"]
    operators = {p["metadata"]["name"] for p in _operator_pods(info)}
    assert leader in operators, (leader, operators)
    body, headers = delivering.signed(SECRET, delivering.issue_opened(number=9))
    status, answer = delivering.post(forwarded, body, headers)
    assert status == 202, (status, answer)
    (job,) = [j for j in answer["jobs"] if j["namespace"] == AGENTS]
    _wait(
        f"the batch Job of {job['name']}",
        lambda: chaining.batch_jobs(info, AGENTS, job["name"]),
    )
    info.kubectl("delete", "pod", "-n", SYSTEM, leader, "--wait=false")

    jobs = chaining.wait_chain(info, AGENTS, job["name"], 3, timeout=CHAIN_SECONDS)
    assert [j["status"]["phase"] for j in jobs] == ["Succeeded"] * 3, [j["status"] for j in jobs]
    for agentjob in jobs:
        name = agentjob["metadata"]["name"]
        assert len(chaining.batch_jobs(info, AGENTS, name)) == 1, name
    holder = _json(info, "get", "lease", RELEASE, "-n", SYSTEM)["spec"]["holderIdentity"]
    assert holder != leader
