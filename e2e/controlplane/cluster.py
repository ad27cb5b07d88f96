"""A real Kubernetes control plane and a real node, or an existing cluster, plus Redis.

There is no Docker engine here, so kind cannot run; the e2e suite and the demo run on
the real upstream binaries instead (SPEC §9): etcd, kube-apiserver,
kube-controller-manager (the controllers agentchain and the node rely on) and
kube-scheduler, a real node (containerd, runc, the kubelet, kube-proxy, CoreDNS and
kube-router: ``realnode.py``), a dynamic provisioner of hostPath volumes for the default
StorageClass (``provisioner.py``), and Debian's redis-server. The real node needs root:
without it ``cluster()`` refuses at once, saying so (``NEEDS_ROOT``).

``cluster()`` is one context manager so that every caller (the pytest session fixture,
``python -m e2e.controlplane up``, a test that needs a private cluster) gets the same
order of start-up and the exact reverse on the way down: every component is pushed onto
an ExitStack the moment it starts, so a failure half-way stops what already runs.
Each wait watches the components started so far, so a crashed apiserver is reported
with its log tail at once instead of as a timeout.

The API server listens on the node's bridge address, which pods can reach (their
loopback is their own), and ``ClusterInfo.real_node`` describes the node;
``ClusterInfo.pod_host`` is that address, where the harness's servers that agents reach
must listen.

The same suite must run unchanged on kind or any cluster: when a kubeconfig is named in
the environment (``AGENTCHAIN_E2E_KUBECONFIG``) the control plane and the node are
skipped and only Redis is started; ``ClusterInfo.local`` tells a test whether host-side
checks (the harness's workdir, the node's files) make sense.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import kubernetes
import yaml

from e2e.controlplane import certs, knobs, processes, provisioner, realnode
from e2e.controlplane.processes import ManagedProcess
from e2e.controlplane.redisserver import RedisServer

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = Path(__file__).with_name("build-binaries.sh")
VOLUMES_DIR = "volumes"  # the provisioner's, under the workdir
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc"
# Generous: two shared cores, often busy with a Go build while tests start.
STARTUP_TIMEOUT_SECONDS = 120.0
# Controllers the product and its tests rely on (names as kube-controller-manager v1.34
# spells them). root-ca-certificate-publisher puts kube-root-ca.crt in every namespace,
# which pods' projected service-account volumes reference. The persistentvolume ones bind
# claims to the volumes the harness's provisioner creates, mark them Released when their
# claim goes, and lift the protection finalizers the API server puts on both.
CONTROLLERS = (
    "job-controller",
    "garbage-collector-controller",
    "ttl-after-finished-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "persistentvolume-binder-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
)


class HarnessError(RuntimeError):
    """The harness cannot provide a cluster (missing binary, module or kubeconfig)."""


class KubectlError(subprocess.CalledProcessError):
    """A failed kubectl call whose message includes what kubectl printed."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstdout: {self.stdout}\nstderr: {self.stderr}"


@dataclass(frozen=True)
class ClusterInfo:
    """How to reach a running cluster and its Redis."""

    kubeconfig: Path  # admin kubeconfig
    server: str  # https://127.0.0.1:PORT
    redis_url: str  # redis://127.0.0.1:PORT/0
    workdir: Path
    local: bool  # False when an existing cluster (kind) is used
    bin_dir: Path | None  # dir with kubectl (None: kubectl from PATH)
    real_node: realnode.RealNode | None = None  # None on an existing cluster
    # The image an agent that names none runs in (the operator's AGENTCHAIN_DEFAULT_IMAGE
    # and workspace image); "" leaves the operator's defaults. The e2e session sets it on
    # the real node (images/e2e-agent).
    agent_image: str = ""

    @property
    def pod_host(self) -> str:
        """The address of this machine that pods reach: the real node's bridge address;
        loopback on an existing cluster, whose pods reach nothing of this machine's."""
        return self.real_node.network.gateway if self.real_node else "127.0.0.1"

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; raise KubectlError on failure if ``check``."""
        exe = str(self.bin_dir / "kubectl") if self.bin_dir else "kubectl"
        argv = [exe, "--kubeconfig", str(self.kubeconfig), *args]
        result = subprocess.run(
            argv, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise KubectlError(result.returncode, argv, result.stdout, result.stderr)
        return result


def say(message: str) -> None:
    """A progress line on stderr, so a slow start-up shows where it is."""
    print(f"[agentchain] {message}", file=sys.stderr, flush=True)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def stop_on_signals() -> None:
    """SIGINT, SIGTERM and SIGHUP become one KeyboardInterrupt; later ones are ignored."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)


def make_workdir() -> Path:
    """A fresh directory under $AGENTCHAIN_E2E_WORKDIR (or the system temp dir)."""
    base = os.environ.get("AGENTCHAIN_E2E_WORKDIR") or None
    if base:
        Path(base).mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="agentchain-e2e-", dir=base))


def finish_workdir(workdir: Path, succeeded: bool) -> None:
    """Remove ``workdir`` after a clean run; keep it (and say where) otherwise."""
    if succeeded and os.environ.get("AGENTCHAIN_KEEP_WORKDIR") != "1":
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        say(f"kept {workdir}; component logs are in {workdir / 'logs'}")


# Why there is no cluster: said by ``cluster()`` and by the e2e tests that skip for it.
NEEDS_ROOT = "the real node needs root; or point AGENTCHAIN_E2E_KUBECONFIG at a cluster"


def existing_kubeconfig() -> Path | None:
    """The kubeconfig of an existing cluster named by the environment, if any."""
    named = os.environ.get("AGENTCHAIN_E2E_KUBECONFIG")
    if not named and os.environ.get("AGENTCHAIN_E2E_USE_KUBECONFIG") == "1":
        named = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
        named = named or str(Path.home() / ".kube" / "config")
    return Path(named).expanduser() if named else None


@contextlib.contextmanager
def cluster(workdir: Path | None = None) -> Iterator[ClusterInfo]:
    """A local control plane with the real node and Redis, or an existing cluster with
    Redis.

    A ``workdir`` given by the caller belongs to the caller and is never removed; one
    created here is removed after a clean exit unless AGENTCHAIN_KEEP_WORKDIR=1.
    """
    kubeconfig = existing_kubeconfig()
    if kubeconfig is None and os.geteuid() != 0:
        raise HarnessError(NEEDS_ROOT)
    owned = workdir is None
    path = make_workdir() if workdir is None else workdir
    path.mkdir(parents=True, exist_ok=True)
    succeeded = False
    try:
        with contextlib.ExitStack() as stack:
            stack.callback(say, "all components stopped")
            if kubeconfig is not None:
                info = _use_existing(stack, path, kubeconfig)
            else:
                info = _start_local(stack, path)
            yield info
            say("stopping the cluster")
        succeeded = True
    finally:
        if owned or not succeeded:
            finish_workdir(path, succeeded and owned)


def _use_existing(stack: contextlib.ExitStack, workdir: Path, kubeconfig: Path) -> ClusterInfo:
    if not kubeconfig.is_file():
        raise HarnessError(f"kubeconfig {kubeconfig} (from the environment) does not exist")
    config = yaml.safe_load(kubeconfig.read_text())
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    entry = next(c for c in config["clusters"] if c["name"] == context["context"]["cluster"])
    server = str(entry["cluster"]["server"])
    say(f"using the existing cluster at {server} (kubeconfig {kubeconfig})")
    redis = _start_redis(stack, workdir)
    return ClusterInfo(kubeconfig, server, redis.url, workdir, local=False, bin_dir=None)


def _start_local(stack: contextlib.ExitStack, workdir: Path) -> ClusterInfo:
    k8s_dir, etcd_dir = find_binaries()
    # The real node's bridge comes first: the API server binds its gateway address.
    network = realnode.begin(stack, workdir)
    pki = certs.generate(workdir / "pki", extra_ips=(network.gateway,))
    etcd = _start_etcd(stack, etcd_dir, workdir)
    server, apiserver = _start_apiserver(stack, k8s_dir, workdir, pki, etcd, network.gateway)
    kubeconfig = write_kubeconfig(workdir / "admin.kubeconfig", server, pki)
    control_plane = [etcd[1], apiserver]
    controllers = (*CONTROLLERS, *realnode.CONTROLLERS)
    control_plane.append(
        _start_controller_manager(stack, k8s_dir, workdir, pki, kubeconfig, controllers)
    )
    control_plane.append(_start_scheduler(stack, k8s_dir, workdir, kubeconfig))
    _ready("the default ServiceAccount", _service_account_check(kubeconfig), control_plane)
    _start_provisioner(stack, workdir, kubeconfig, control_plane)
    node = realnode.start(stack, workdir, network, pki, kubeconfig, control_plane)
    redis = _start_redis(stack, workdir)
    return ClusterInfo(
        kubeconfig, server, redis.url, workdir, local=True, bin_dir=k8s_dir, real_node=node
    )


def find_binaries() -> tuple[Path, Path]:
    """(Kubernetes bin dir, etcd bin dir), built by build-binaries.sh unless cached."""
    say("locating control-plane binaries (built on first use, see README; then cached)")
    # The script serialises concurrent sessions itself (flock on its cache). stderr is
    # inherited so the build's own progress lines stay visible.
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "all"], stdout=subprocess.PIPE, text=True, check=False
    )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise HarnessError(f"{BUILD_SCRIPT} failed with code {result.returncode}")
    k8s_dir, etcd_dir, *_ = lines[-1].split(":")
    return Path(k8s_dir), Path(etcd_dir)


def _launch(
    stack: contextlib.ExitStack,
    name: str,
    argv: list[str],
    workdir: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> ManagedProcess:
    say(f"starting {name}…")
    process = processes.start(name, argv, workdir, env=env, cwd=cwd)
    stack.callback(process.stop)
    return process


def _ready(what: str, check: Callable[[], bool], watch: list[ManagedProcess]) -> None:
    seconds = processes.wait_for(check, what=what, timeout=STARTUP_TIMEOUT_SECONDS, watch=watch)
    say(f"{what} ready in {seconds:.1f}s")


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except urllib.error.HTTPError as error:
        error.close()  # an unread error body would otherwise leak its socket
        return False
    except OSError:
        return False


def _start_etcd(
    stack: contextlib.ExitStack, etcd_dir: Path, workdir: Path
) -> tuple[str, ManagedProcess]:
    client = f"http://127.0.0.1:{processes.free_port()}"
    peer = f"http://127.0.0.1:{processes.free_port()}"
    argv = [
        str(etcd_dir / "etcd"), "--name=agentchain", f"--data-dir={workdir / 'etcd'}",
        f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=agentchain={peer}",
        # Test data is disposable; fsync would make every write wait for the disk.
        "--unsafe-no-fsync",
    ]  # fmt: skip
    etcd = _launch(stack, "etcd", argv, workdir)
    _ready("etcd", lambda: _http_ok(f"{client}/health"), [etcd])
    return client, etcd


def _start_apiserver(
    stack: contextlib.ExitStack,
    k8s_dir: Path,
    workdir: Path,
    pki: certs.Pki,
    etcd: tuple[str, ManagedProcess],
    address: str,
) -> tuple[str, ManagedProcess]:
    port = processes.free_port()
    argv = [
        str(k8s_dir / "kube-apiserver"), f"--etcd-servers={etcd[0]}",
        f"--bind-address={address}", f"--advertise-address={address}", f"--secure-port={port}",
        f"--cert-dir={workdir / 'apiserver'}",
        f"--tls-cert-file={pki.apiserver.cert}", f"--tls-private-key-file={pki.apiserver.key}",
        f"--client-ca-file={pki.ca.cert}", "--authorization-mode=RBAC",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--api-audiences={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki.service_account_pub}",
        f"--service-account-signing-key-file={pki.service_account_key}",
        "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
        "--kubelet-preferred-address-types=InternalIP",
        f"--kubelet-client-certificate={pki.kubelet_client.cert}",
        f"--kubelet-client-key={pki.kubelet_client.key}",
        f"--kubelet-certificate-authority={pki.ca.cert}",
        # On the real node's bridge address the 'kubernetes' Service gets a real
        # endpoint, for pods' in-cluster clients.
        "--endpoint-reconciler-type=lease",
        *knobs.audit_flags(workdir),
    ]  # fmt: skip
    apiserver = _launch(stack, "kube-apiserver", argv, workdir)
    server = f"https://{address}:{port}"
    context = ssl.create_default_context(cafile=str(pki.ca.cert))
    context.load_cert_chain(pki.admin.cert, pki.admin.key)
    _ready("kube-apiserver", lambda: _http_ok(f"{server}/readyz", context), [etcd[1], apiserver])
    return server, apiserver


def write_kubeconfig(path: Path, server: str, pki: certs.Pki) -> Path:
    """An admin kubeconfig (client cert in system:masters) for ``server``.

    The certificates are embedded rather than named by path, so the file can be copied
    elsewhere on the machine (or to a user's ``~/.kube``) and still work.
    """
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "agentchain", "cluster": {
            "server": server, "certificate-authority-data": _b64(pki.ca.cert)}}],
        "users": [{"name": certs.ADMIN_USER, "user": {
            "client-certificate-data": _b64(pki.admin.cert),
            "client-key-data": _b64(pki.admin.key)}}],
        "contexts": [{"name": "agentchain", "context": {
            "cluster": "agentchain", "user": certs.ADMIN_USER, "namespace": "default"}}],
        "current-context": "agentchain",
    }  # fmt: skip
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode("ascii")


def _start_controller_manager(
    stack: contextlib.ExitStack,
    k8s_dir: Path,
    workdir: Path,
    pki: certs.Pki,
    kubeconfig: Path,
    controllers: tuple[str, ...] = CONTROLLERS,
) -> ManagedProcess:
    argv = [
        str(k8s_dir / "kube-controller-manager"), f"--kubeconfig={kubeconfig}",
        f"--controllers={','.join(controllers)}",
        f"--service-account-private-key-file={pki.service_account_key}",
        f"--root-ca-file={pki.ca.cert}",
        "--leader-elect=false", "--use-service-account-credentials=false",
        # No health endpoint needed (readiness is observed through the API), and a fixed
        # default port would collide between two clusters on one machine.
        "--secure-port=0",
        *knobs.client_rate_flags(),
    ]  # fmt: skip
    return _launch(stack, "kube-controller-manager", argv, workdir)


def _start_scheduler(
    stack: contextlib.ExitStack, k8s_dir: Path, workdir: Path, kubeconfig: Path
) -> ManagedProcess:
    argv = [
        str(k8s_dir / "kube-scheduler"), f"--kubeconfig={kubeconfig}",
        "--leader-elect=false", "--secure-port=0",
    ]  # fmt: skip
    return _launch(stack, "kube-scheduler", argv, workdir)


def _api_client(kubeconfig: Path) -> kubernetes.client.ApiClient:
    # The kubernetes package ships no annotations for its config loaders.
    loader = kubernetes.config.new_client_from_config
    client: kubernetes.client.ApiClient = loader(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    return client


def _service_account_check(kubeconfig: Path) -> Callable[[], bool]:
    # Pods are refused until their namespace's ServiceAccount exists, so this also tells
    # that kube-controller-manager runs.
    def check() -> bool:
        with _api_client(kubeconfig) as api:
            try:
                kubernetes.client.CoreV1Api(api).read_namespaced_service_account(
                    "default", "default"
                )
            except kubernetes.client.ApiException:
                return False
            return True

    return check


def _storage_class_check(kubeconfig: Path) -> Callable[[], bool]:
    def check() -> bool:
        with _api_client(kubeconfig) as api:
            try:
                kubernetes.client.StorageV1Api(api).read_storage_class(provisioner.CLASS_NAME)
            except kubernetes.client.ApiException:
                return False
            return True

    return check


def _python_env() -> dict[str, str]:
    """The environment of a harness component run as ``python -m e2e.controlplane.…``."""
    pythonpath = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": pythonpath}


def _start_provisioner(
    stack: contextlib.ExitStack,
    workdir: Path,
    kubeconfig: Path,
    control_plane: list[ManagedProcess],
) -> None:
    """The dynamic provisioner of the default StorageClass (e2e/controlplane/provisioner.py)."""
    argv = [
        sys.executable, "-m", "e2e.controlplane.provisioner", "--kubeconfig", str(kubeconfig),
        "--root", str(workdir / VOLUMES_DIR),
    ]  # fmt: skip
    process = _launch(stack, "provisioner", argv, workdir, env=_python_env(), cwd=REPO_ROOT)
    control_plane.append(process)
    what = f"StorageClass {provisioner.CLASS_NAME}"
    _ready(what, _storage_class_check(kubeconfig), control_plane)


def _start_redis(stack: contextlib.ExitStack, workdir: Path) -> RedisServer:
    say("starting redis-server…")
    # Its log lands next to the other components' logs.
    return stack.enter_context(RedisServer(workdir / "logs"))
