"""The real node's generated configs, images and iptables clean-up plan (pure parts)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
import tomllib
from pathlib import Path

import pytest
import yaml
from e2e.controlplane import realnode, realnode_lanes
from e2e.controlplane import realnode_config as config
from e2e.controlplane import realnode_host as host
from e2e.controlplane import realnode_images as images
from e2e.controlplane import realnode_policy as policy


def test_containerd_config_keeps_state_under_the_workdir_and_restricts_oom_score() -> None:
    paths = config.NodePaths(Path("/w/realnode"))
    parsed = tomllib.loads(config.containerd_toml(paths, "agentchain.local/pause:x", "/cni"))
    assert parsed["root"].startswith("/w/realnode/") and parsed["state"].startswith("/w/")
    assert parsed["grpc"]["address"] == "/w/realnode/containerd.sock"
    cri = parsed["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True
    assert cri["sandbox_image"] == "agentchain.local/pause:x"
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["options"]["SystemdCgroup"] is False
    assert runc["options"]["Root"].startswith("/w/realnode/")
    assert cri["cni"]["conf_dir"] == "/w/realnode/cni/net.d"


def test_kubelet_config_allows_cgroup_v1_and_serves_on_the_bridge() -> None:
    paths, network = config.NodePaths(Path("/w")), config.Network()
    tls = config.KubeletTls(Path("/c"), Path("/k"), Path("/ca"))
    parsed = yaml.safe_load(config.kubelet_config(paths, network, tls, 1, 2))
    assert parsed["failCgroupV1"] is False
    assert parsed["cgroupDriver"] == "cgroupfs"
    assert parsed["address"] == network.gateway == "10.213.0.1"
    assert parsed["authentication"]["anonymous"]["enabled"] is False
    assert parsed["authentication"]["x509"]["clientCAFile"] == "/ca"
    assert parsed["containerRuntimeEndpoint"] == "unix:///w/containerd.sock"


def test_cni_conflist_uses_the_bridge_and_subnet_without_masquerade() -> None:
    network = config.Network()
    parsed = json.loads(config.cni_conflist(network, Path("/ipam")))
    bridge = parsed["plugins"][0]
    assert bridge["bridge"] == config.BRIDGE and bridge["ipMasq"] is False
    assert bridge["ipam"]["ranges"] == [[{"subnet": "10.213.0.0/24", "gateway": "10.213.0.1"}]]


def test_oci_archive_names_every_blob_by_its_digest(tmp_path: Path) -> None:
    files = [images.File("bin/tool", b"binary", 0o755), images.File("bin/sh", link="tool")]
    image = images.oci_archive("demo", files, ["/bin/sh"], tmp_path / "demo.tar")
    with tarfile.open(image.archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
        blobs = {
            name.removeprefix("blobs/sha256/"): tar.extractfile(member).read()  # type: ignore[union-attr]
            for name, member in members.items()
            if name.startswith("blobs/sha256/") and member.isfile()
        }
        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
    for digest, data in blobs.items():
        assert hashlib.sha256(data).hexdigest() == digest
    (entry,) = index["manifests"]
    manifest = json.loads(blobs[entry["digest"].removeprefix("sha256:")])
    assert entry["annotations"]["io.containerd.image.name"] == image.ref
    assert image.ref.endswith(":" + entry["digest"].removeprefix("sha256:")[:16])
    (layer,) = manifest["layers"]
    with tarfile.open(fileobj=io.BytesIO(blobs[layer["digest"].removeprefix("sha256:")])) as tar:
        assert tar.getmember("bin/sh").linkname == "tool"
        assert tar.getmember("bin/tool").mode == 0o755
    # Same inputs, same bytes: the cache key and tag are stable.
    again = images.oci_archive("demo", files, ["/bin/sh"], tmp_path / "again.tar")
    assert again.ref == image.ref
    assert again.archive.read_bytes() == image.archive.read_bytes()


def test_clean_up_plan_takes_only_new_kube_and_cni_chains_and_their_jumps() -> None:
    before = "*filter\n:INPUT ACCEPT [0:0]\n:KUBE-OLD - [0:0]\n-A INPUT -j KUBE-OLD\nCOMMIT\n"
    after = (
        "*filter\n:INPUT ACCEPT [0:0]\n:KUBE-OLD - [0:0]\n:KUBE-FIREWALL - [0:0]\n"
        ":MINE - [0:0]\n-A INPUT -j KUBE-OLD\n-A INPUT -j KUBE-FIREWALL\n"
        "-A KUBE-FIREWALL -j DROP\n-A INPUT -j MINE\nCOMMIT\n"
        "*nat\n:CNI-HOSTPORT-DNAT - [0:0]\nCOMMIT\n"
    )
    jumps, chains = host.own_chains(after, before)
    assert jumps == [("filter", ["INPUT", "-j", "KUBE-FIREWALL"])]
    assert chains == [("filter", "KUBE-FIREWALL"), ("nat", "CNI-HOSTPORT-DNAT")]


def test_clean_up_plan_keeps_a_quoted_comment_as_one_word_of_the_rule() -> None:
    # kube-router's and kube-proxy's jumps carry comments with spaces; split on spaces,
    # `iptables -D` would get the quotes as text and match no rule.
    comment = '--comment "kube-router netpol - TEMCG2JMHZYE7H7T"'
    jump = f"-A FORWARD -m comment {comment} -j KUBE-ROUTER-FORWARD"
    after = f"*filter\n:FORWARD ACCEPT [0:0]\n:KUBE-ROUTER-FORWARD - [0:0]\n{jump}\nCOMMIT\n"
    jumps, chains = host.own_chains(after, "*filter\n:FORWARD ACCEPT [0:0]\nCOMMIT\n")
    assert jumps == [("filter", [
        "FORWARD", "-m", "comment", "--comment", "kube-router netpol - TEMCG2JMHZYE7H7T",
        "-j", "KUBE-ROUTER-FORWARD",
    ])]  # fmt: skip
    assert chains == [("filter", "KUBE-ROUTER-FORWARD")]


def test_host_state_reports_a_new_ipset() -> None:
    before = host.HostState.capture()
    after = dataclasses.replace(before, ipsets=before.ipsets | {"KUBE-SRC-NEW"})
    assert before.differences(after) == {"ipsets": {"gone": [], "new": ["KUBE-SRC-NEW"]}}


def test_policy_engine_runs_the_firewall_alone_for_the_node() -> None:
    argv = policy.argv(Path("/bin/kube-router"), Path("/w/kubeconfig"))
    assert argv[0] == "/bin/kube-router"
    flags = dict(arg.removeprefix("--").split("=", 1) for arg in argv[1:])
    assert flags["run-firewall"] == "true"
    assert flags["run-router"] == flags["run-service-proxy"] == "false"
    assert flags["hostname-override"] == config.NODE_NAME
    assert flags["service-cluster-ip-range"] == config.SERVICE_CIDR
    assert flags["kubeconfig"] == "/w/kubeconfig"
    # No listener on the shared machine's addresses.
    assert flags["health-port"] == flags["metrics-port"] == "0"


def test_a_second_real_node_on_the_machine_is_refused_with_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCHAIN_CACHE", str(tmp_path))
    # Not told to wait: `make test` tells its lanes to (AGENTCHAIN_REALNODE_WAIT).
    monkeypatch.delenv(realnode.WAIT_ENV, raising=False)
    with realnode.exclusive():
        with pytest.raises(realnode.RealNodeError, match="only one can run at a time"):
            with realnode.exclusive():
                pass
    with realnode.exclusive():  # released with the first
        pass


def test_a_second_real_node_waits_for_the_first_when_told_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `make test` runs the real node's tests beside other runs on a shared machine: they
    # wait for the lock (AGENTCHAIN_REALNODE_WAIT) rather than fail at once.
    monkeypatch.setenv("AGENTCHAIN_CACHE", str(tmp_path))
    monkeypatch.setenv(realnode.WAIT_ENV, "30")
    first = realnode.exclusive(wait=0)
    first.__enter__()
    timer = threading.Timer(0.5, first.__exit__, (None, None, None))
    timer.start()
    started = time.monotonic()
    with realnode.exclusive():
        waited = time.monotonic() - started
    timer.join()
    assert 0.4 < waited < 10
    with realnode.exclusive(), pytest.raises(realnode.RealNodeError, match=r"waited 0 s"):
        with realnode.exclusive(wait=0.3):
            pass


def test_a_session_holding_the_machine_keeps_other_processes_out_until_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCHAIN_CACHE", str(tmp_path))
    code = "from e2e.controlplane import realnode\nwith realnode.exclusive(wait=0): pass"
    probe = [sys.executable, "-c", code]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    # Outside a lane the session is the exclusive lock itself; in one (`make test`'s
    # lanes), a share of the machine session, which keeps a node outside a lane out all
    # the same. A session of this test's own: not the worker's (its cluster's) that a
    # nested call would join.
    monkeypatch.setattr(realnode_lanes, "_active", None)
    outside_a_lane = realnode_lanes.lane() is None
    with realnode.machine():
        assert realnode._machine_held == outside_a_lane
        refused = subprocess.run(probe, capture_output=True, text=True, check=False, env=env)
        assert refused.returncode != 0 and "only one can run at a time" in refused.stderr
    assert not realnode._machine_held
    subprocess.run(probe, check=True, env=env)


@pytest.mark.skipif(not Path("/usr/bin/redis-server").exists(), reason="needs Debian's redis")
def test_redis_image_holds_redis_its_libraries_and_the_charts_shell_tools() -> None:
    from e2e.controlplane import realnode_redis

    libraries = realnode_redis.shared_libraries(Path("/usr/bin/redis-server"))
    assert "/lib64/ld-linux-x86-64.so.2" in libraries
    assert any(path.endswith("/libc.so.6") for path in libraries)
    # The chart's Redis script and probe: sh -c with these, then redis-server/redis-cli.
    assert {"sh", "cat", "printf", "sha256sum", "cut", "grep"} <= set(realnode_redis.APPLETS)
