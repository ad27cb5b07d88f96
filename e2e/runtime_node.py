"""The runtimes' reference images on the session's node, for the suite's runtime modules.

Every agent runs in a container on the real node, and a runtime's agent in its
runtime's reference image (``images/agent/Dockerfile``, built by
``e2e/controlplane/agent_images.py``), as in a user's cluster:

* ``reference_images(info, runtimes)`` builds the images (cached by their inputs),
  imports each into the session's real node once, and returns the operator settings
  that name them (``AGENTCHAIN_RUNTIME_IMAGE_*``): an AiAgent with a runtime and no
  ``image`` then runs in it with no command of the test's.
* ``RunnerPods`` keeps one idle pod per runtime in its reference image, and ``run``
  executes the image's runner (``agentchain agent run``) in it through ``kubectl exec``
  (stdout, stderr and the exit code apart, as the kubelet hands them over), in a fresh
  directory holding a copy of the test's files: the tests of the runner alone
  (``e2e/test_agent_runner.py`` and the runtimes' own modules) run the CLI of the image,
  not this machine's.
* ``agent_host(request)`` is where a server the agents reach listens: the session
  cluster's ``pod_host`` (the real node's bridge address).
* ``idle_pod`` is such a pod of any image; it can mount directories of this machine at
  the same paths (the real node is this machine), so a test and the command it runs in
  the pod name the same files (``e2e/test_workspace_git.py``).
"""

from __future__ import annotations

import base64
import io
import shlex
import tarfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from e2e import chaining
from e2e.controlplane import agent_images
from e2e.controlplane.cluster import ClusterInfo

RUNNER_NAMESPACE = "agentchain-runners"
"""The namespace of the idle runner pods (one per runtime, for the session)."""

# (containerd socket, image reference) already imported: an import costs tens of seconds.
_IMPORTED: set[tuple[str, str]] = set()


def reference_images(info: ClusterInfo, runtimes: tuple[str, ...]) -> dict[str, str]:
    """The operator settings naming each runtime's reference image, imported into the
    session's real node; skipped on a cluster this harness cannot load images into."""
    node = info.real_node
    if node is None:
        pytest.skip("the reference images are loaded into the local cluster's real node only")
    env = {}
    for runtime in runtimes:
        built = agent_images.build(runtime)
        key = (str(node.paths.containerd_socket), built.ref)
        if key not in _IMPORTED:
            agent_images.import_into(node.paths.containerd_socket, built)
            _IMPORTED.add(key)
        env[f"AGENTCHAIN_RUNTIME_IMAGE_{runtime.upper().replace('-', '_')}"] = built.ref
    return env


def agent_host(request: pytest.FixtureRequest) -> str:
    """Where a server that agents reach listens: the session cluster's ``pod_host``
    (which starts the cluster first: the bridge must exist to bind its address)."""
    info: ClusterInfo = request.getfixturevalue("cluster_info")
    return info.pod_host


@dataclass
class Ran:
    """A finished run of the runner: its exit code, stdout and stderr apart."""

    code: int
    stdout: str
    stderr: str


@dataclass
class RunnerPods:
    """One idle pod per runtime in its reference image, where runs are executed."""

    info: ClusterInfo
    pods: dict[str, str] = field(default_factory=dict)

    def run(
        self,
        runtime: str,
        files: Path,
        env: Mapping[str, str],
        timeout: float,
        command: tuple[str, ...] = ("agentchain", "agent", "run"),
        stdin: str | None = None,
    ) -> tuple[Ran, str]:
        """``command`` (the image's runner unless told) with ``env`` and ``stdin`` in a
        fresh directory holding a copy of ``files``; the run and that directory's path in
        the container. ``env`` values may name the directory as ``{dir}``."""
        pod = self._pod(runtime)
        where = f"/tmp/run-{uuid.uuid4().hex[:12]}"
        self.info.kubectl(
            "exec", "-i", "-n", RUNNER_NAMESPACE, pod, "--",
            "sh", "-c", f"mkdir -p {where} && base64 -d | tar -x -C {where}",
            input=_tar(files), timeout=60,
        )  # fmt: skip
        assigned = [f"{k}={v.replace('{dir}', where)}" for k, v in env.items()]
        script = f"cd {where} && exec env {shlex.join([*assigned, *command])}"
        interactive = ["-i"] if stdin is not None else []
        done = self.info.kubectl(
            "exec", *interactive, "-n", RUNNER_NAMESPACE, pod, "--", "sh", "-c", script,
            input=stdin, check=False, timeout=timeout,
        )  # fmt: skip
        # kubectl adds its own last line to stderr when the command failed; the runner's
        # last line (its one-line message) is what the tests read.
        stderr = done.stderr.removesuffix(f"command terminated with exit code {done.returncode}\n")
        return Ran(done.returncode, done.stdout, stderr), where

    def _pod(self, runtime: str) -> str:
        if runtime not in self.pods:
            [image] = reference_images(self.info, (runtime,)).values()
            self.pods[runtime] = idle_pod(self.info, f"runner-{runtime}", image)
        return self.pods[runtime]


def idle_pod(
    info: ClusterInfo,
    name: str,
    image: str,
    *,
    host_dirs: tuple[Path, ...] = (),
    as_root: bool = False,
) -> str:
    """A pod of ``image`` that sleeps in ``RUNNER_NAMESPACE``, ready for ``kubectl exec``
    (each exec with its own streams and exit code); created once, then reused.

    ``host_dirs`` are directories of this machine (the real node's own file system)
    mounted at the same paths in the container, so a test and the commands it runs in
    the pod name the same files; ``as_root`` runs the container as uid 0 instead of the
    image's user, for a test whose own hands on those files are root's."""
    info.kubectl("create", "namespace", RUNNER_NAMESPACE, check=False)
    container: dict[str, object] = {
        "name": "idle",
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["sleep", "infinity"],
    }
    spec: dict[str, object] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 1,
        "containers": [container],
    }
    if as_root:
        container["securityContext"] = {"runAsUser": 0, "runAsGroup": 0}
    if host_dirs:
        volumes = [(f"host-{n}", str(d)) for n, d in enumerate(host_dirs)]
        spec["volumes"] = [
            {"name": v, "hostPath": {"path": d, "type": "Directory"}} for v, d in volumes
        ]
        container["volumeMounts"] = [{"name": v, "mountPath": d} for v, d in volumes]
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    chaining.apply(info, RUNNER_NAMESPACE, manifest)
    info.kubectl(
        "wait", "--for=condition=Ready", f"pod/{name}", "-n", RUNNER_NAMESPACE,
        "--timeout=120s", timeout=130,
    )  # fmt: skip
    return name


def exec_argv(info: ClusterInfo, pod: str, env: Mapping[str, str], *command: str) -> list[str]:
    """The ``kubectl exec -i`` command line that runs ``command`` with ``env`` in ``pod``,
    its stdin, stdout and stderr those of the ``kubectl`` process."""
    exe = str(info.bin_dir / "kubectl") if info.bin_dir else "kubectl"
    assigned = [f"{k}={v}" for k, v in env.items()]
    return [
        exe, "--kubeconfig", str(info.kubeconfig), "exec", "-i", "-n", RUNNER_NAMESPACE, pod,
        "--", "env", *assigned, *command,
    ]  # fmt: skip


def _tar(files: Path) -> str:
    """``files``' tree as a tar archive in base64, which passes through ``kubectl``'s
    text input byte for byte."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path in sorted(files.rglob("*")):
            archive.add(path, arcname=str(path.relative_to(files)), recursive=False)
    return base64.b64encode(buffer.getvalue()).decode()


_PODS: dict[str, RunnerPods] = {}


@dataclass
class AgentDir:
    """Where a test's run of the runner happens: ``path`` holds the files the test
    prepares (the prompt, a home, a repository's settings); ``pods`` are the session's
    runner pods, which get a copy of ``path``."""

    path: Path
    pods: RunnerPods


@pytest.fixture
def agent_dir(tmp_path: Path, cluster_info: ClusterInfo) -> AgentDir:
    """A run's directory (of its own under ``tmp_path``: the pods get a copy of it), and
    the runner pods. It names ``cluster_info`` as an argument, so a test using it uses the
    cluster, and its stand-ins (``model_standin``...) listen where the pods reach them."""
    path = tmp_path / "run"
    path.mkdir()
    pods = _PODS.setdefault(str(cluster_info.kubeconfig), RunnerPods(cluster_info))
    return AgentDir(path, pods)
