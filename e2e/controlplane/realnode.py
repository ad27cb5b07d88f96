"""A real Kubernetes node beside the local control plane: containerd, kubelet, kube-proxy.

Every local cluster runs on it (``cluster()``: the e2e session's, ``make demo``'s, the
clusters the ``realnode`` tests start). This starts, in order, on a private bridge
network (``realnode_config.Network``):

* Debian's containerd 1.6 with runc and the CNI plugins, all state under the workdir;
* the locally built ``pause`` and test images, imported with ``ctr`` (``realnode_images``);
* the upstream kubelet and kube-proxy (iptables mode), same pinned version as the control
  plane, built by ``build-binaries.sh node``;
* CoreDNS as a host process on the bridge address, behind a ``kube-dns`` Service;
* kube-router in firewall-only mode, which enforces NetworkPolicy (``realnode_policy``).

Many real nodes run at once, each in a lane of its own (``realnode_lanes``): network and
mount namespaces that ``lane-ns.sh`` enters, where the node's bridge, iptables chains and
fixed paths are the lane's. A node outside any lane uses the machine's own (the kubelet
and containerd use a few fixed paths whatever they are told, and their iptables chains
have fixed names), so it runs alone: it is refused, with a clear message, while another
real node or a lane runs (a lock in the cache directory).

Teardown first deletes every pod, so the kubelet unmounts volumes and containerd removes
network namespaces as they do on a real cluster, then stops the components and finally
``realnode_host.restore`` puts back what they changed on the machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import kubernetes

from e2e.controlplane import certs, processes
from e2e.controlplane import realnode_config as config
from e2e.controlplane import realnode_host as host
from e2e.controlplane import realnode_images as images
from e2e.controlplane import realnode_lanes as lanes
from e2e.controlplane import realnode_policy as policy
from e2e.controlplane.processes import ManagedProcess

BUILD_SCRIPT = Path(__file__).with_name("build-binaries.sh")
VERSIONS = Path(__file__).with_name("versions.env")
CNI_BIN_DIR = "/usr/lib/cni"
# Debian's packages install these; the message names the packages when one is missing.
REQUIRED = {
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    "nft": "nftables",
    "ip": "iproute2",
    "ipset": "ipset",
}
# Controllers a real node needs beyond cluster.CONTROLLERS: node-lifecycle lifts the
# kubelet's not-ready taint, endpointslice gives Services their endpoints, and the
# aggregation controller fills the built-in view/edit roles. The workload controllers
# run what the chart installs: the operator's Deployment (and its ReplicaSets), the
# Sentinel mode's StatefulSet, and the PodDisruptionBudgets' status (disruption).
CONTROLLERS = (
    "node-lifecycle-controller",
    "endpointslice-controller",
    "clusterrole-aggregation-controller",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "disruption-controller",
)
STARTUP_TIMEOUT_SECONDS = 120.0
DRAIN_TIMEOUT_SECONDS = 90.0
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class RealNodeError(RuntimeError):
    """The real node cannot run here (a missing package, another real node running)."""


@dataclass(frozen=True)
class RealNode:
    """A running real node: its name, network and the images it was given."""

    name: str
    network: config.Network
    paths: config.NodePaths
    pause_image: str
    test_image: str


def say(message: str) -> None:
    print(f"[agentchain] {message}", file=sys.stderr, flush=True)


def kubernetes_version() -> str:
    for line in VERSIONS.read_text().splitlines():
        if line.startswith("KUBERNETES_VERSION="):
            return line.split("=", 1)[1].strip()
    raise RealNodeError(f"no KUBERNETES_VERSION in {VERSIONS}")


def _check_tools() -> None:
    missing = {tool: pkg for tool, pkg in REQUIRED.items() if not _which(tool)}
    if missing or not Path(CNI_BIN_DIR, "bridge").is_file():
        packages = sorted({*missing.values(), "containernetworking-plugins"})
        raise RealNodeError(
            f"the real node needs Debian's {', '.join(packages)} (missing: "
            f"{', '.join(sorted(missing)) or CNI_BIN_DIR}); e2e/setup.sh installs them"
        )
    if os.geteuid() != 0:
        raise RealNodeError("the real node needs root (containerd, kubelet, iptables)")


def _which(tool: str) -> str | None:
    return shutil.which(tool, path=PATH)


def node_binaries() -> tuple[Path, Path]:
    """(kubelet/kube-proxy dir, CoreDNS dir), built by build-binaries.sh unless cached."""
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "node"], stdout=subprocess.PIPE, text=True, check=False
    )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise RealNodeError(f"{BUILD_SCRIPT} node failed with code {result.returncode}")
    node_dir, coredns_dir = lines[-1].split(":")
    return Path(node_dir), Path(coredns_dir)


WAIT_ENV = lanes.WAIT_ENV


@contextlib.contextmanager
def exclusive(wait: float | None = None) -> Iterator[None]:
    """Hold the machine's one real-node lock, waiting up to ``wait`` seconds (default:
    ``$AGENTCHAIN_REALNODE_WAIT``, else 0) for another run to release it; raise
    RealNodeError when it is still held then."""
    refusal = (
        f"another real node runs on this machine (lock {lanes.lock_path()}); outside a "
        "lane's namespaces the kubelet and containerd use the machine's fixed paths, so "
        "only one can run at a time (run each in a lane of its own, "
        f"{lanes.WRAPPER.name}, to run several)"
    )
    with lanes.lock_path().open("w") as lock:
        try:
            lanes.flock(lock, shared=False, wait=wait, refusal=refusal)
        except lanes.LaneError as error:
            raise RealNodeError(str(error)) from None
        yield


# Whether this process holds the lock for a whole run of tests (``machine``).
_machine_held = False


@contextlib.contextmanager
def machine(wait: float | None = None) -> Iterator[None]:
    """Hold the machine for a whole run of tests: each real node this process starts
    inside takes it as held. A test snapshots the machine before its node starts and
    compares after it has stopped; holding it across both keeps another run's node out
    of the comparison, and a run that waited snapshots only once it has it.

    Outside a lane that is the exclusive lock; in a lane, a share of the machine session
    (``realnode_lanes.machine_session``), whose global part, if this is the last lane
    out, must be as it was (else RealNodeError)."""
    global _machine_held
    if lanes.lane() is None:
        with exclusive(wait):
            _machine_held = True
            try:
                yield
            finally:
                _machine_held = False
        return
    with _lane_session(wait):
        yield


@contextlib.contextmanager
def _lane_session(wait: float | None = None) -> Iterator[None]:
    try:
        with lanes.machine_session(wait) as session:
            yield
    except lanes.LaneError as error:
        raise RealNodeError(str(error)) from None
    if session.differences:
        raise RealNodeError(f"the machine differs after the last lane: {session.differences}")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def begin(stack: contextlib.ExitStack, workdir: Path) -> config.Network:
    """Claim the machine (alone, or a share of it in a lane), snapshot it, and bring up
    the node's bridge.

    Returns the network whose gateway address the control plane must bind. Pushed on
    ``stack`` so that, on the way down, the machine is restored after everything else.
    """
    _check_tools()
    if lanes.lane() is not None:
        # Joins this process's session if it has one (the e2e session's fixture).
        stack.enter_context(_lane_session())
    elif not _machine_held:
        stack.enter_context(exclusive())
    if Path("/sys/class/net", config.BRIDGE).exists():
        # Nothing else holds the lock, so this is a run that was killed before its
        # teardown; a snapshot now would take its leftovers for the machine's own state.
        raise RealNodeError(
            f"bridge {config.BRIDGE} exists but no real node runs: a killed run left it "
            f"(and maybe iptables chains, sysctls, cgroups /sys/fs/cgroup/*/"
            f"{lanes.cgroup_root()}); remove them, e.g. `ip link delete {config.BRIDGE}`"
        )
    before = host.HostState.capture()
    stack.callback(host.restore, before, workdir)
    network = config.Network()
    say(f"creating bridge {config.BRIDGE} with {network.gateway}/{network.prefix_length}")
    _ip("link", "add", "name", config.BRIDGE, "address", network.bridge_mac, "type", "bridge")
    _ip("addr", "add", f"{network.gateway}/{network.prefix_length}", "dev", config.BRIDGE)
    _ip("link", "set", config.BRIDGE, "up")
    return network


def _make_cgroup_root() -> None:
    """The kubelet's ``cgroupRoot`` in every cgroup v1 hierarchy: the kubelet refuses to
    start unless it exists ("cgroup has some missing paths"), and does not create it.

    A new cpuset cgroup starts with no CPUs and no memory nodes, which no process can
    join; it gets its parent's. Teardown (``realnode_host.restore``) removes the tree.
    """
    for hierarchy in host.CGROUP_MOUNT.iterdir():
        if hierarchy.name == "unified" or not (hierarchy / "cgroup.procs").is_file():
            continue
        root = hierarchy / lanes.cgroup_root()
        root.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if (hierarchy / name).is_file():
                (root / name).write_text((hierarchy / name).read_text())


def _launch(
    stack: contextlib.ExitStack, name: str, argv: list[str], workdir: Path
) -> ManagedProcess:
    say(f"starting {name}…")
    process = processes.start(name, argv, workdir, env={**os.environ, "PATH": PATH})
    stack.callback(process.stop)
    return process


def _wait(what: str, check: Callable[[], bool], watch: list[ManagedProcess]) -> None:
    seconds = processes.wait_for(check, what=what, timeout=STARTUP_TIMEOUT_SECONDS, watch=watch)
    say(f"{what} ready in {seconds:.1f}s")


def _ctr_ok(socket: Path) -> Callable[[], bool]:
    def check() -> bool:
        if not socket.exists():
            return False
        result = subprocess.run(
            ["ctr", "--address", str(socket), "version"],
            capture_output=True, check=False, timeout=10, env={"PATH": PATH},
        )  # fmt: skip
        return result.returncode == 0

    return check


def _api(kubeconfig: Path) -> kubernetes.client.ApiClient:
    loader = kubernetes.config.new_client_from_config
    client: kubernetes.client.ApiClient = loader(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    return client


def _node_ready(kubeconfig: Path) -> Callable[[], bool]:
    def check() -> bool:
        with _api(kubeconfig) as api:
            try:
                node = kubernetes.client.CoreV1Api(api).read_node(config.NODE_NAME)
            except kubernetes.client.ApiException:
                return False
        conditions = (node.status.conditions if node.status else None) or []
        ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
        # The scheduler skips the node until node-lifecycle-controller lifts this taint.
        taints = (node.spec.taints if node.spec else None) or []
        tainted = any(t.key == "node.kubernetes.io/not-ready" for t in taints)
        return ready and not tainted

    return check


def _delete_workloads(api: kubernetes.client.ApiClient) -> None:
    """Delete what would recreate a deleted pod (a chart's Deployment and StatefulSet,
    their ReplicaSets, agents' Jobs), so the drain below is not undone as it goes."""
    apps, batch = kubernetes.client.AppsV1Api(api), kubernetes.client.BatchV1Api(api)
    deletions = (
        apps.delete_collection_namespaced_deployment,
        apps.delete_collection_namespaced_stateful_set,
        apps.delete_collection_namespaced_daemon_set,
        apps.delete_collection_namespaced_replica_set,
        batch.delete_collection_namespaced_job,
    )
    with contextlib.suppress(kubernetes.client.ApiException):
        for namespace in kubernetes.client.CoreV1Api(api).list_namespace().items:
            name = namespace.metadata.name if namespace.metadata else None
            for delete in deletions:
                with contextlib.suppress(kubernetes.client.ApiException):
                    delete(name or "", propagation_policy="Background")


def _drain(kubeconfig: Path) -> None:
    """Delete every pod and wait until this node's are gone, so the kubelet and containerd
    undo their mounts, network namespaces and cgroups themselves before they are stopped.

    Only pods bound to this node have anything of the machine's to undo; one the
    scheduler never placed is nobody's to wait for."""
    say("deleting the real node's pods")
    with _api(kubeconfig) as api:
        core = kubernetes.client.CoreV1Api(api)
        _delete_workloads(api)
        with contextlib.suppress(kubernetes.client.ApiException):
            for pod in core.list_pod_for_all_namespaces().items:
                meta = pod.metadata
                if meta is None or not meta.name or not meta.namespace:
                    continue
                with contextlib.suppress(kubernetes.client.ApiException):
                    # Not 0: that removes the object at once, before the kubelet
                    # has cleaned up; with a grace period the kubelet removes it last.
                    core.delete_namespaced_pod(meta.name, meta.namespace, grace_period_seconds=1)
        deadline = time.monotonic() + DRAIN_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            try:
                pods = core.list_pod_for_all_namespaces().items
                if not any(p.spec and p.spec.node_name == config.NODE_NAME for p in pods):
                    return
            except kubernetes.client.ApiException:
                return
            time.sleep(0.5)
    say(f"pods still present after {DRAIN_TIMEOUT_SECONDS:.0f}s; tearing down anyway")


def _dns_service(kubeconfig: Path, network: config.Network) -> None:
    """A selector-less ``kube-dns`` Service at DNS_SERVICE_IP whose endpoint is the host
    CoreDNS on the bridge address (kube-proxy translates the Service IP to it)."""
    with _api(kubeconfig) as api:
        core = kubernetes.client.CoreV1Api(api)
        ports = [
            kubernetes.client.V1ServicePort(name="dns", port=53, protocol="UDP"),
            kubernetes.client.V1ServicePort(name="dns-tcp", port=53, protocol="TCP"),
        ]
        core.create_namespaced_service(
            "kube-system",
            kubernetes.client.V1Service(
                metadata=kubernetes.client.V1ObjectMeta(name="kube-dns"),
                spec=kubernetes.client.V1ServiceSpec(cluster_ip=config.DNS_SERVICE_IP, ports=ports),
            ),
        )
        kubernetes.client.DiscoveryV1Api(api).create_namespaced_endpoint_slice(
            "kube-system",
            kubernetes.client.V1EndpointSlice(
                metadata=kubernetes.client.V1ObjectMeta(
                    name="kube-dns-host",
                    labels={"kubernetes.io/service-name": "kube-dns"},
                ),
                address_type="IPv4",
                endpoints=[kubernetes.client.V1Endpoint(addresses=[network.gateway])],
                ports=[
                    kubernetes.client.DiscoveryV1EndpointPort(name="dns", port=53, protocol="UDP"),
                    kubernetes.client.DiscoveryV1EndpointPort(
                        name="dns-tcp", port=53, protocol="TCP"
                    ),
                ],
            ),
        )


def start(
    stack: contextlib.ExitStack,
    workdir: Path,
    network: config.Network,
    pki: certs.Pki,
    kubeconfig: Path,
    control_plane: list[ManagedProcess],
) -> RealNode:
    """Start containerd, import the images, start the kubelet, kube-proxy and CoreDNS,
    and wait until the node is Ready and schedulable."""
    node_dir, coredns_dir = node_binaries()
    version = kubernetes_version()
    pause, test = images.pause_image(version), images.test_image()
    paths = config.NodePaths(workdir / "realnode")
    paths.cni_conf_dir.mkdir(parents=True, exist_ok=True)
    paths.kubelet_dir.mkdir(parents=True, exist_ok=True)
    paths.containerd_config.write_text(config.containerd_toml(paths, pause.ref, CNI_BIN_DIR))
    (paths.cni_conf_dir / "10-agentchain.conflist").write_text(
        config.cni_conflist(network, paths.root / "cni" / "ipam")
    )
    containerd = _launch(
        stack, "containerd", ["containerd", "--config", str(paths.containerd_config)], workdir
    )
    watch = [*control_plane, containerd]
    _wait("containerd", _ctr_ok(paths.containerd_socket), watch)
    for image in (pause, test):
        images.import_image(Path("ctr"), paths.containerd_socket, image)
    say(f"imported {pause.ref} and {test.ref}")

    _make_cgroup_root()
    tls = config.KubeletTls(pki.node.cert, pki.node.key, pki.ca.cert)
    ports = processes.free_port(), processes.free_port()
    cgroup_root = lanes.cgroup_root()
    paths.kubelet_config.write_text(
        config.kubelet_config(paths, network, tls, *ports, cgroup_root=cgroup_root)
    )
    kubelet = _launch(stack, "kubelet", [
        str(node_dir / "kubelet"), f"--config={paths.kubelet_config}",
        f"--kubeconfig={kubeconfig}", f"--root-dir={paths.kubelet_dir}",
        f"--cert-dir={paths.kubelet_dir / 'pki'}", f"--hostname-override={config.NODE_NAME}",
        f"--node-ip={network.gateway}", "--v=2",
    ], workdir)  # fmt: skip
    watch.append(kubelet)

    paths.kube_proxy_config.write_text(
        config.kube_proxy_config(kubeconfig, network, processes.free_port(), processes.free_port())
    )
    proxy_argv = [str(node_dir / "kube-proxy"), f"--config={paths.kube_proxy_config}"]
    # Runs after kube-proxy stops: removes its chains as upstream's own cleanup does.
    stack.callback(
        subprocess.run, [proxy_argv[0], "--cleanup"], capture_output=True, check=False,
        env={"PATH": PATH},
    )  # fmt: skip
    watch.append(_launch(stack, "kube-proxy", proxy_argv, workdir))

    paths.corefile.write_text(config.corefile(network, kubeconfig))
    coredns = [str(coredns_dir / "coredns"), "-conf", str(paths.corefile)]
    watch.append(_launch(stack, "coredns", coredns, workdir))
    _dns_service(kubeconfig, network)

    _wait(f"node {config.NODE_NAME}", _node_ready(kubeconfig), watch)
    # After the node is registered: kube-router reads the node's address when it starts.
    say("starting kube-router (NetworkPolicy)…")
    watch.append(policy.start(stack, workdir, kubeconfig, watch))
    say("kube-router enforces NetworkPolicy")
    # Pushed last, so it runs first on the way down, while the kubelet still runs.
    stack.callback(_drain, kubeconfig)
    return RealNode(config.NODE_NAME, network, paths, pause.ref, test.ref)
