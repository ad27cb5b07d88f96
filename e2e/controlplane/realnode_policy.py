"""The real node's NetworkPolicy engine: kube-router in firewall-only mode.

A cluster without a policy engine accepts NetworkPolicy objects and enforces none of
them, so the chart's policies (and the "an agent pod cannot reach Redis" promise) would be
rendered, never tested. kube-router's network policy controller is the engine here: it
is the one upstream engine that runs beside an existing CNI (the bridge plugin) and
kube-proxy, as a plain process, with nothing but iptables and ipset. It is started with
its router and service proxy off (``--run-router=false --run-service-proxy=false``), so
it only writes filter rules, and built from the Go module proxy by
``build-binaries.sh netpol`` (version in ``versions.env``), cached by version.

How it enforces: for each pod on the node it adds a ``KUBE-POD-FW-*`` chain, reached
from ``KUBE-ROUTER-FORWARD``/``-INPUT``/``-OUTPUT`` (jumped to from the built-in chains)
by the pod's address; pod-to-pod traffic on the node's bridge passes those chains because
``br_netfilter`` hands bridged packets to iptables. Policies become ``KUBE-NWPLCY-*``
chains matching ipsets of pod addresses.

What it changes on the machine: chains whose names start with ``KUBE-`` (which
``realnode_host.restore`` already removes, with the rules that jump to them) and ipsets
(which ``HostState`` now records and ``restore`` destroys when new). Its own
``--cleanup-config`` is not used: it also runs the service proxy's and router's cleanup,
which open IPVS over netlink and so make the kernel load ``ip_vs`` on a machine that never
used it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from e2e.controlplane import processes
from e2e.controlplane import realnode_config as config
from e2e.controlplane.processes import ManagedProcess

BUILD_SCRIPT = Path(__file__).with_name("build-binaries.sh")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STARTUP_TIMEOUT_SECONDS = 60.0
# The chain kube-router jumps to from FORWARD; it exists once the controller has done
# its first full sync, so the node is not reported ready with policies unenforced.
FORWARD_CHAIN = "KUBE-ROUTER-FORWARD"


class PolicyEngineError(RuntimeError):
    """The policy engine cannot be built or started."""


def engine_binary() -> Path:
    """kube-router, built by build-binaries.sh unless cached."""
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "netpol"], stdout=subprocess.PIPE, text=True, check=False
    )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise PolicyEngineError(f"{BUILD_SCRIPT} netpol failed with code {result.returncode}")
    return Path(lines[-1]) / "kube-router"


def argv(binary: Path, kubeconfig: Path) -> list[str]:
    """kube-router's command line: the firewall alone, for the one node, IPv4 only."""
    return [
        str(binary),
        "--run-firewall=true",
        "--run-router=false",
        "--run-service-proxy=false",
        f"--kubeconfig={kubeconfig}",
        f"--hostname-override={config.NODE_NAME}",
        # Traffic to Service addresses is kube-proxy's; the controller needs the range
        # to tell it apart from pod traffic.
        f"--service-cluster-ip-range={config.SERVICE_CIDR}",
        "--enable-ipv4=true",
        "--enable-ipv6=false",
        # Its health server would listen on every address of a shared machine; the
        # harness watches the process and the chains instead. Metrics stay off (0).
        "--health-port=0",
        "--metrics-port=0",
        "--v=2",
    ]


def _chain_exists(chain: str) -> Callable[[], bool]:
    def check() -> bool:
        result = subprocess.run(
            ["iptables", "-t", "filter", "-S", chain],
            capture_output=True, check=False, timeout=30, env={"PATH": PATH},
        )  # fmt: skip
        return result.returncode == 0

    return check


def start(
    stack: contextlib.ExitStack, workdir: Path, kubeconfig: Path, watch: list[ManagedProcess]
) -> ManagedProcess:
    """Start kube-router once the node object exists (it reads the node's address at
    start) and wait for its first sync; stopped by ``stack``. Its chains and ipsets are
    removed by ``realnode_host.restore`` at the end of the teardown."""
    binary = engine_binary()
    process = processes.start(
        "kube-router", argv(binary, kubeconfig), workdir, env={**os.environ, "PATH": PATH}
    )
    stack.callback(process.stop)
    processes.wait_for(
        _chain_exists(FORWARD_CHAIN),
        what="kube-router's firewall chains",
        timeout=STARTUP_TIMEOUT_SECONDS,
        watch=[*watch, process],
    )
    return process
