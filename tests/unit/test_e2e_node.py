"""The e2e session's node (the real node, which needs root) and the e2e agent image's
build inputs (``images/e2e-agent``).

Aspects covered:
- without root and without a named cluster, ``cluster()`` refuses at once, saying the
  real node needs root or a cluster named by ``AGENTCHAIN_E2E_KUBECONFIG``, and a test
  that needs the session's cluster skips with that reason (fails under ``CI=true``), and
  ``python -m e2e.controlplane up`` says so and exits 2 before starting anything;
- an agent's Python is the image's ``python3`` (agents always run in containers);
- an operator of a cluster on the real node listens on the bridge address and makes the
  session's agent image the default and workspace image; without a real node (a named
  cluster) it listens on loopback and leaves the operator's defaults;
- the e2e agent image's dependency and package stages are the top-level Dockerfile's
  word for word (buildah's layer cache shares them), it builds from the slim Python
  image only, runs as the job pods' user, has git, and its context holds the package only;
- a lane (``lane-ns.sh``) has a network of its own with loopback up, its own view of
  the fixed paths (written there, the machine's stay as they were) and of ``/sys``, and
  the machine's cgroup hierarchies; the variable alone does not make a lane;
- each lane's kubelet gets a cgroup root of its own, which another lane's clean-up
  leaves alone;
- machine sessions run at once: the first snapshots what lanes share, the last one out
  restores it (an ended lane's cgroup goes, a running lane's stays and is reported) and
  compares; a real node outside a lane is refused while a session runs, with a message
  naming the lanes' wrapper.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from e2e import chaining, operating, realnodes
from e2e.controlplane import __main__ as controlplane_main
from e2e.controlplane import agent_images, realnode, realnode_lanes
from e2e.controlplane import realnode_config as config
from e2e.controlplane import realnode_host as host
from e2e.controlplane.cluster import NEEDS_ROOT, ClusterInfo, HarnessError, cluster
from e2e.controlplane.operator_image import base_images, context_files, ignore_rules

ROOT = Path(__file__).resolve().parents[2]
E2E_DOCKERFILE = (ROOT / agent_images.E2E_DOCKERFILE).read_text()


@pytest.fixture(autouse=True)
def _no_named_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTCHAIN_E2E_KUBECONFIG", raising=False)
    monkeypatch.setenv("AGENTCHAIN_E2E_USE_KUBECONFIG", "0")


def _info(tmp_path: Path, *, real: bool, image: str = "") -> ClusterInfo:
    node = realnode.RealNode(
        config.NODE_NAME, config.Network(), config.NodePaths(tmp_path), "pause", "test"
    )
    return ClusterInfo(
        tmp_path / "kubeconfig", "https://127.0.0.1:1", "redis://127.0.0.1:1/0", tmp_path,
        local=True, bin_dir=None, real_node=node if real else None, agent_image=image,
    )  # fmt: skip


def test_without_root_or_a_named_cluster_the_cluster_is_refused_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(HarnessError) as refused, cluster(tmp_path / "work"):
        pytest.fail("a cluster started without root")
    assert str(refused.value) == NEEDS_ROOT
    assert "needs root" in NEEDS_ROOT and "AGENTCHAIN_E2E_KUBECONFIG" in NEEDS_ROOT


def test_without_root_a_test_needing_the_cluster_skips_and_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    realnodes.skip_without_root()  # root here: nothing to skip
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(pytest.skip.Exception) as skipped:
        realnodes.skip_without_root()
    assert str(skipped.value) == NEEDS_ROOT
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        realnodes.skip_without_root()
    assert NEEDS_ROOT in str(failed.value)


def test_up_without_root_says_why_and_what_to_do_before_starting_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert controlplane_main.main(["up", "--with-operator"]) == 2
    said = capsys.readouterr()
    assert said.out == ""  # no exports: nothing was started
    assert f"cannot start the cluster: {NEEDS_ROOT}" in said.err, said.err


def test_an_agents_python_is_the_images() -> None:
    assert chaining.python_command("print(1)", "x") == ["python3", "-c", "print(1)", "x"]
    assert chaining.agent_python() == "python3"


def test_an_operator_on_the_real_node_listens_on_the_bridge_with_the_agent_image(
    tmp_path: Path,
) -> None:
    info = _info(tmp_path, real=True, image="agentchain.local/agentchain-e2e-agent:k")
    op = operating.OperatorProcess(info, tmp_path / "operator.kubeconfig")
    env = op.env()
    assert op.host == config.Network().gateway != "127.0.0.1"
    assert env["AGENTCHAIN_LISTEN_HOST"] == op.host
    assert env["AGENTCHAIN_API_URL"] == f"http://{op.host}:{op.port}"
    assert env["AGENTCHAIN_DEFAULT_IMAGE"] == "agentchain.local/agentchain-e2e-agent:k"
    assert env["AGENTCHAIN_WORKSPACE_IMAGE"] == "agentchain.local/agentchain-e2e-agent:k"
    # A test's own settings still win.
    own = operating.OperatorProcess(
        info, tmp_path / "k", extra_env={"AGENTCHAIN_WORKSPACE_IMAGE": "mine"}, host="10.9.9.9"
    )
    assert own.host == "10.9.9.9"
    assert own.env()["AGENTCHAIN_WORKSPACE_IMAGE"] == "mine"


def test_an_operator_without_a_real_node_keeps_loopback_and_the_default_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTCHAIN_DEFAULT_IMAGE", raising=False)
    monkeypatch.delenv("AGENTCHAIN_WORKSPACE_IMAGE", raising=False)
    op = operating.OperatorProcess(_info(tmp_path, real=False), tmp_path / "operator.kubeconfig")
    env = op.env()
    assert op.host == "127.0.0.1"
    assert "AGENTCHAIN_DEFAULT_IMAGE" not in env
    assert "AGENTCHAIN_WORKSPACE_IMAGE" not in env


def _stages(dockerfile: str) -> list[list[str]]:
    """Each stage's instructions, continuation lines joined, comments and blanks dropped."""
    stages: list[list[str]] = [[]]
    pending = ""
    for raw in dockerfile.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line, pending = pending + line, ""
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


def test_the_dependency_and_package_stages_are_the_operator_images() -> None:
    ours, product = _stages(E2E_DOCKERFILE), _stages((ROOT / "Dockerfile").read_text())
    assert ours[0] == product[0]  # ARG PYTHON_IMAGE
    assert ours[1:3] == product[1:3]  # deps, builder
    assert len(ours) == 4


def test_the_e2e_agent_image_builds_from_slim_python_as_the_job_pods_user_with_git() -> None:
    assert set(base_images(E2E_DOCKERFILE)) == {"python:3.11-slim"}
    final = _stages(E2E_DOCKERFILE)[-1]
    assert "USER 10001:10001" in final
    assert "ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp" in final
    [install] = [line for line in final if "apt-get install" in line]
    assert " git " in f"{install} "


def test_the_e2e_agent_images_context_holds_the_package_only(tmp_path: Path) -> None:
    ignore = (ROOT / f"{agent_images.E2E_DOCKERFILE}.dockerignore").read_text()
    for path in ("pyproject.toml", "README.md", "operator/agentchain/x.py", "e2e/conftest.py",
                 "images/versions.env", "operator/agentchain/__pycache__/x.pyc"):  # fmt: skip
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert context_files(tmp_path, ignore_rules(ignore)) == [
        "README.md",
        "operator/agentchain/x.py",
        "pyproject.toml",
    ]


def _in_a_lane(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [str(realnode_lanes.WRAPPER), sys.executable, "-c", code, *args]
    return subprocess.run(argv, capture_output=True, text=True, check=False, env=env, timeout=60)


LANE_PROBE = """
import json, os, subprocess
from pathlib import Path
from e2e.controlplane import realnode_host as host, realnode_lanes as lanes
import sys
Path("/var/lib/kubelet/device-plugins").mkdir(parents=True, exist_ok=True)
for fixed in ("/run", "/var/lib", "/var/log"):
    Path(fixed, sys.argv[1]).mkdir()
links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
print(json.dumps({
    "lane": lanes.lane(), "root": lanes.cgroup_root(),
    "links": [line.split(": ")[1] for line in links.splitlines()],
    "lo_up": "UP" in links.split("lo:")[1].split(">")[0],
    "sys": sorted(os.listdir("/sys/class/net")),
    "cgroups": (host.CGROUP_MOUNT / "memory" / "cgroup.procs").is_file(),
    "plugins": os.path.isdir("/var/lib/kubelet/device-plugins"),
}))
"""


def test_a_lane_has_its_own_network_and_fixed_paths_and_the_machines_cgroups() -> None:
    if os.geteuid() != 0:
        pytest.skip("entering namespaces needs root")
    name = f"agentchain-lane-probe-{os.getpid()}"
    outer = host.lane()  # None on the machine; the test's own lane under `make test`
    result = _in_a_lane(LANE_PROBE, name)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["lane"] and seen["lane"] != outer
    assert seen["root"] == f"agentchain-realnode-{seen['lane']}"
    assert seen["links"] == ["lo"] and seen["lo_up"] and seen["sys"] == ["lo"]
    assert seen["cgroups"] and seen["plugins"]
    # Written in the lane, not on the machine.
    assert not any(Path(fixed, name).exists() for fixed in ("/run", "/var/lib", "/var/log"))
    assert host.lane() == outer


def test_the_variable_alone_does_not_make_a_lane(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(realnode_lanes.LANE_ENV, "42")
    monkeypatch.setenv(host.LANE_FROM_ENV, os.readlink("/proc/self/ns/net"))
    assert realnode_lanes.lane() is None
    assert realnode_lanes.cgroup_root() == config.CGROUP_ROOT


def test_each_lanes_kubelet_has_a_cgroup_root_of_its_own(tmp_path: Path) -> None:
    tls = config.KubeletTls(tmp_path / "c", tmp_path / "k", tmp_path / "ca")
    paths, network = config.NodePaths(tmp_path), config.Network()
    own = yaml.safe_load(config.kubelet_config(paths, network, tls, 1, 2))
    assert own["cgroupRoot"] == "/agentchain-realnode"
    root = config.cgroup_root("7")
    lane = yaml.safe_load(config.kubelet_config(paths, network, tls, 1, 2, cgroup_root=root))
    assert lane["cgroupRoot"] == "/agentchain-realnode-7"
    # One lane's clean-up takes its own root's cgroups, never another lane's.
    assert host.in_cgroup_root("/sys/fs/cgroup/cpu/agentchain-realnode-7/kubepods", root)
    assert not host.in_cgroup_root("/sys/fs/cgroup/cpu/agentchain-realnode-71/kubepods", root)
    assert not host.in_cgroup_root("/sys/fs/cgroup/cpu/agentchain-realnode/kubepods", root)


SESSION = """
from e2e.controlplane import realnode_lanes as lanes
with lanes.machine_session(wait=0) as session:
    pass
print(session.last)
"""
EXCLUSIVE = "from e2e.controlplane import realnode\nwith realnode.exclusive(wait=0): pass"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [sys.executable, "-c", code]
    return subprocess.run(argv, capture_output=True, text=True, check=False, env=env, timeout=60)


def test_machine_sessions_run_at_once_and_the_last_one_restores_the_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    if os.geteuid() != 0:
        pytest.skip("cgroups need root")
    monkeypatch.setenv("AGENTCHAIN_CACHE", str(tmp_path))
    # Sessions of this test's own: in `make test`'s lanes the worker's session (its
    # cluster's) is the one a nested call would join.
    monkeypatch.setattr(realnode_lanes, "_active", None)
    snapshot = realnode_lanes.lock_path(realnode_lanes.SNAPSHOT)
    hierarchy = next(
        h for h in host.CGROUP_MOUNT.iterdir()
        if h.name != "unified" and (h / "cgroup.procs").is_file()
    )  # fmt: skip
    # What the node of a lane that has ended left behind: a lane is named by its pid.
    gone = _python("import os; print(os.getpid())").stdout.strip()
    left = hierarchy / config.cgroup_root(gone)
    # A lane still running, named by a live pid (not this process's: in a lane, that is
    # its own node's cgroup root).
    running = hierarchy / config.cgroup_root(str(_a_live_pid(request)))
    with realnode_lanes.machine_session(wait=0) as first:
        assert snapshot.is_file()
        other = _python(SESSION)
        assert other.returncode == 0 and other.stdout.strip() == "False", other.stderr
        refused = _python(EXCLUSIVE)
        assert refused.returncode != 0
        assert realnode_lanes.WRAPPER.name in refused.stderr, refused.stderr
        left.mkdir()
        running.mkdir()  # a lane still running keeps its cgroups
    try:
        assert first.last and not snapshot.exists(), first
        assert not left.exists()
        assert str(left) not in str(first.differences)
        # A running lane's cgroups are its own to compare (its node's teardown does), not
        # the machine's: another lane's pods come and go while this session runs.
        assert running.is_dir() and str(running) not in str(first.differences)
    finally:
        running.rmdir()
    _python(EXCLUSIVE).check_returncode()


def test_a_machine_snapshot_leaves_out_the_running_lanes_cgroups(
    request: pytest.FixtureRequest,
) -> None:
    # Their pods come and go while a snapshot waits to be compared (another lane's node
    # beside this one); an ended lane's leftovers are the machine's, and show.
    # A live pid that names no lane of this machine (in a lane, this process's pid names
    # its own node's cgroup root).
    live, ended = _a_live_pid(request), _an_ended_pid()
    assert host._lanes_cgroup(f"/sys/fs/cgroup/cpu/agentchain-realnode-{live}/pod") == (True, True)
    assert host._lanes_cgroup(f"/sys/fs/cgroup/cpu/agentchain-realnode-{ended}/x") == (True, False)
    assert host._lanes_cgroup("/sys/fs/cgroup/cpu/agentchain-realnode/kubepods") == (False, False)
    if os.geteuid() != 0 or not (host.CGROUP_MOUNT / "pids").is_dir():
        return
    roots = [host.CGROUP_MOUNT / "pids" / f"agentchain-realnode-{pid}" for pid in (live, ended)]
    # Another program's cgroup, which comes and goes as it likes: not the node's business.
    roots.append(host.CGROUP_MOUNT / "pids" / f"some-job-runner-{live}")
    try:
        for root in roots:
            root.mkdir()
        seen = host.HostState.capture("machine").cgroups
        assert str(roots[0]) not in seen and str(roots[1]) in seen
        assert str(roots[2]) not in seen
    finally:
        for root in roots:
            root.rmdir()


def _an_ended_pid() -> int:
    done = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    return int(done.stdout)


def _a_live_pid(request: pytest.FixtureRequest) -> int:
    """The pid of a process that runs until the test ends."""
    alive = subprocess.Popen(["sleep", "600"])

    def end() -> None:
        alive.kill()
        alive.wait()

    request.addfinalizer(end)
    return alive.pid


def test_the_bridge_has_a_fixed_locally_administered_unicast_mac_of_its_own() -> None:
    mac = config.Network().bridge_mac
    assert mac == "02:ac:0a:d5:00:01"  # 02: locally administered, unicast; then 10.213.0.1.
    first = int(mac.split(":")[0], 16)
    assert first & 0b10 and not first & 0b01
    assert config.Network("10.214.0.0/24").bridge_mac == "02:ac:0a:d6:00:01"
