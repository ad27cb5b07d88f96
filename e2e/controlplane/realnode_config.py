"""The real node's configuration files, as pure functions of a few paths and addresses.

``realnode.py`` starts Debian's containerd, the upstream kubelet and kube-proxy and
CoreDNS; everything they read is generated here so that the choices (and the reasons
for them, most of them quirks of this kind of machine) sit in one place and can be
read without the process handling around them. No function here touches the disk.

The node lives on a Linux bridge of its own with a private /24 (``Network``): the
harness gives the bridge its gateway address before anything starts, so the API server,
the kubelet and CoreDNS can bind that address, which pods (in network namespaces of
their own, where 127.0.0.1 is their own loopback) can reach.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path

import yaml

# Linux interface names are at most 15 characters; this one is unlikely to clash.
BRIDGE = "acrn0"
NODE_NAME = "agentchain-realnode"
# Under every cgroup v1 hierarchy: the kubelet puts kubepods/… below it, and teardown
# removes the whole subtree. A node in a lane (realnode_lanes) gets one named after
# the lane (``cgroup_root``): the cgroup tree is the machine's, shared by every lane.
CGROUP_ROOT = "agentchain-realnode"
CLUSTER_DOMAIN = "cluster.local"
# Same range as the loopback control plane (cluster.py), so certs.APISERVER_IPS holds.
SERVICE_CIDR = "10.0.0.0/24"
DNS_SERVICE_IP = "10.0.0.10"


def cgroup_root(lane: str | None) -> str:
    """The kubelet's ``cgroupRoot`` (without its leading slash): the node's own, or the
    lane's when it runs in one, so two lanes' kubelets never touch each other's cgroups."""
    return f"{CGROUP_ROOT}-{lane}" if lane else CGROUP_ROOT


@dataclass(frozen=True)
class Network:
    """The node's pod network: one private /24 on ``BRIDGE``."""

    subnet: str = "10.213.0.0/24"

    @property
    def gateway(self) -> str:
        """The host's address on the bridge: where pods reach the API server and DNS."""
        return str(next(ipaddress.ip_network(self.subnet).hosts()))

    @property
    def prefix_length(self) -> int:
        return ipaddress.ip_network(self.subnet).prefixlen

    @property
    def bridge_mac(self) -> str:
        """The bridge's own MAC, set once: locally administered, unicast (``02:``), then
        ``ac`` and the gateway's four bytes, as Docker names its containers' MACs.

        A Linux bridge with no MAC of its own takes the lowest of its ports', so it
        changes whenever a pod's veth with a lower one comes or the one it took goes;
        every pod's cached address of the gateway is then wrong until its ARP entry
        expires, and its packets to this machine (the API server, DNS, the job API,
        stand-ins) are lost for 20 to 50 s. Measured: a pod polling the bridge address
        while others came and went timed out in bursts of 35 to 45 s."""
        packed = ipaddress.ip_address(self.gateway).packed
        return ":".join(f"{b:02x}" for b in (0x02, 0xAC, *packed))


@dataclass(frozen=True)
class NodePaths:
    """Where the node's components keep their state: all under the run's workdir."""

    root: Path

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.root / "containerd.toml"

    @property
    def cni_conf_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def kubelet_dir(self) -> Path:
        return self.root / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet.yaml"

    @property
    def kube_proxy_config(self) -> Path:
        return self.root / "kube-proxy.yaml"

    @property
    def corefile(self) -> Path:
        return self.root / "Corefile"


def _toml_string(value: str) -> str:
    # JSON string escapes are valid TOML basic-string escapes.
    return json.dumps(value)


def containerd_toml(paths: NodePaths, sandbox_image: str, cni_bin_dir: str) -> str:
    """containerd 1.6's config (version 2): its own root, state and socket, CRI on runc.

    * ``restrict_oom_score_adj``: this VM's bounding set lacks CAP_SYS_RESOURCE, and
      without it every sandbox fails with "can't get final child's PID from pipe: EOF".
    * ``sandbox_image`` is the locally built pause image, imported before the kubelet
      starts, so containerd never pulls (there is no registry to pull from).
    * runc's own state root, the ``opt`` plugin's directory and the CNI config all go
      under the workdir; what containerd keeps at fixed paths (``/run/containerd/s``
      for shim sockets, ``/var/run/netns`` for pod network namespaces, ``/var/lib/cni``
      for CNI's result cache) is cleaned by the node's teardown.
    * AppArmor is off: Debian's kernel may have it enabled without the parser that
      containerd's default profile needs.
    """
    root = paths.root / "containerd"
    cri = '[plugins."io.containerd.grpc.v1.cri"]'
    runc = '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]'
    lines = [
        "version = 2",
        f"root = {_toml_string(str(root / 'root'))}",
        f"state = {_toml_string(str(root / 'state'))}",
        'disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", '
        '"io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", '
        '"io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]',
        "[grpc]",
        f"  address = {_toml_string(str(paths.containerd_socket))}",
        "[ttrpc]",
        '  address = ""',
        "[debug]",
        '  address = ""',
        "[metrics]",
        '  address = ""',
        '[plugins."io.containerd.internal.v1.opt"]',
        f"  path = {_toml_string(str(root / 'opt'))}",
        cri,
        f"  sandbox_image = {_toml_string(sandbox_image)}",
        "  restrict_oom_score_adj = true",
        "  tolerate_missing_hugepages_controller = true",
        "  disable_apparmor = true",
        "  enable_selinux = false",
        '  stream_server_address = "127.0.0.1"',
        '  stream_server_port = "0"',
        f"{cri[:-1]}.containerd]",
        '  snapshotter = "overlayfs"',
        '  default_runtime_name = "runc"',
        runc,
        '  runtime_type = "io.containerd.runc.v2"',
        f"{runc[:-1]}.options]",
        "  SystemdCgroup = false",
        f"  Root = {_toml_string(str(root / 'runc'))}",
        f"{cri[:-1]}.cni]",
        f"  bin_dir = {_toml_string(cni_bin_dir)}",
        f"  conf_dir = {_toml_string(str(paths.cni_conf_dir))}",
        "  max_conf_num = 1",
    ]
    return "\n".join(lines) + "\n"


def cni_conflist(network: Network, ipam_dir: Path) -> str:
    """bridge + host-local + portmap on ``BRIDGE``; containerd adds loopback itself.

    No masquerading: pods talk only to addresses on this machine (the bridge gateway and
    Service IPs that kube-proxy translates to it), so no NAT rule is needed for them.
    ``isGateway`` makes the bridge plugin enable IPv4 forwarding, which teardown undoes.
    """
    conf = {
        "cniVersion": "0.4.0",
        "name": "agentchain-realnode",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": network.subnet, "gateway": network.gateway}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(ipam_dir),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(conf, indent=2) + "\n"


@dataclass(frozen=True)
class KubeletTls:
    """The kubelet's serving pair and the CA its clients (the API server) present."""

    cert: Path
    key: Path
    client_ca: Path


def kubelet_config(
    paths: NodePaths,
    network: Network,
    tls: KubeletTls,
    port: int,
    healthz_port: int,
    cgroup_root: str = CGROUP_ROOT,
) -> str:
    """The KubeletConfiguration for cgroup v1 with the cgroupfs driver on this machine.

    * ``failCgroupV1: false``: the kubelet refuses cgroup v1 by default since 1.31.
    * Authentication is static: client certificates of the cluster's CA (the API server
      presents its kubelet-client certificate), no webhook, no anonymous access.
    * Disk-based eviction and image garbage collection are off (as kind does): the node
      sees the machine's whole disk, which other work fills and empties.
    * Logs and volume plugins live under the workdir instead of /var/log/pods and
      /usr/libexec/kubernetes.
    """
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": network.gateway,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "tlsCertFile": str(tls.cert),
        "tlsPrivateKeyFile": str(tls.key),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(tls.client_ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{cgroup_root}",
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{paths.containerd_socket}",
        "podLogsDir": str(paths.root / "pod-logs"),
        "volumePluginDir": str(paths.kubelet_dir / "volume-plugins"),
        "clusterDNS": [DNS_SERVICE_IP],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": "/etc/resolv.conf",
        "imageGCHighThresholdPercent": 100,
        "evictionHard": {
            "nodefs.available": "0%",
            "nodefs.inodesFree": "0%",
            "imagefs.available": "0%",
        },
        "serializeImagePulls": False,
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
    }
    return yaml.safe_dump(config, sort_keys=False)


def kube_proxy_config(
    kubeconfig: Path, network: Network, healthz_port: int, metrics_port: int
) -> str:
    """kube-proxy in iptables mode, changing no global setting it can be told not to.

    Conntrack limits and timeouts of 0 mean "leave the machine's values"; with
    ``localhostNodePorts`` off it does not set ``route_localnet``; NodePorts answer on the
    bridge address only, never on the machine's real interface.
    """
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": NODE_NAME,
        "bindAddress": network.gateway,
        "clusterCIDR": network.subnet,
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "nodePortAddresses": [f"{network.gateway}/32"],
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
        "iptables": {"localhostNodePorts": False, "masqueradeAll": False},
    }
    return yaml.safe_dump(config, sort_keys=False)


def corefile(network: Network, kubeconfig: Path) -> str:
    """CoreDNS as a host process on the bridge address: cluster names from the API,
    everything else forwarded to the machine's resolvers."""
    return (
        f".:53 {{\n"
        f"    bind {network.gateway}\n"
        f"    errors\n"
        f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n"
        f"        kubeconfig {kubeconfig}\n"
        f"        pods insecure\n"
        f"        fallthrough in-addr.arpa ip6.arpa\n"
        f"    }}\n"
        f"    forward . /etc/resolv.conf\n"
        f"    cache 30\n"
        f"}}\n"
    )
