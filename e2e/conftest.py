"""pytest wiring for the end-to-end suite: one cluster per session, one namespace per test.

Starting a control plane costs seconds, a namespace costs milliseconds, so the cluster is
session-scoped and isolation between tests comes from namespaces. Everything under
``e2e/`` is marked ``e2e`` here, so ``pytest -m e2e`` (or ``-m 'not e2e'``) selects
the suite without each test having to remember the marker.

The session's workdir is created here rather than inside ``cluster()`` because only
pytest knows whether a test failed: after a failed run the workdir (with every
component's log) is kept and named in the terminal summary; after a clean run it goes.

The session's cluster runs on the real node (kubelet and containerd), unless
``AGENTCHAIN_E2E_KUBECONFIG`` names a cluster: the e2e agent image (``images/e2e-agent``)
is built from this tree and imported, every agent that names no image runs in it, and
the harness's servers that agents reach (the operator, the model stand-in, the GitHub API
stand-in, the git server) listen on the node's bridge address (``ClusterInfo.pod_host``),
since a pod's loopback is its own. The real node needs root: without root and without a
named cluster, every test that needs the cluster skips with one reason, and under CI
(``CI=true``) fails instead. The tests marked ``realnode`` start a real node of their own,
which a session cluster already running would hold, so they run in a pytest of their own
(``-m realnode``: ``make realnode``, or the lane ``make test`` runs beside the others) and
skip, saying so, beside tests that use the session's cluster. Under pytest-xdist (``-n``)
each worker is a lane: it runs in network and mount namespaces of its own
(``e2e/controlplane/lane-ns.sh``) with its own control plane and real node, and the
controller compares the machine once they have all ended (``realnode_lanes``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from e2e import realnodes
from e2e.controlplane import realnode, realnode_lanes
from e2e.controlplane.cluster import (
    ClusterInfo,
    existing_kubeconfig,
    finish_workdir,
    make_workdir,
    say,
)
from e2e.github.fixtures import require_spec
from e2e.github.gitserver import GitServer
from e2e.github.standin import GitHubStandIn
from e2e.models.server import ModelStandIn
from e2e.runtime_node import agent_dir  # noqa: F401  (fixture for the runner's tests)

E2E_DIR = Path(__file__).resolve().parent
NAMESPACE_READY_TIMEOUT_SECONDS = 30.0
_KEPT_WORKDIR = pytest.StashKey[Path]()
_MACHINE = pytest.StashKey[tuple[contextlib.ExitStack, realnode_lanes.MachineSession]]()
_MACHINE_DIFFERS = pytest.StashKey[tuple[str, str]]()


def pytest_configure(config: pytest.Config) -> None:
    workers = config.getoption("tx", default=None)
    lanes = workers and not hasattr(config, "workerinput") and _may_start_a_cluster(config)
    if lanes and _session_on_the_real_node():
        _lanes_for_workers(config, len(workers))


def _may_start_a_cluster(config: pytest.Config) -> bool:
    """Whether this run may start the session's cluster: it selects e2e tests (not
    ``-m 'not e2e'``, not only paths outside ``e2e/``), so the workers need lanes."""
    if config.option.markexpr.replace(" ", "") == "note2e":
        return False
    paths = [Path(arg.split("::")[0]).resolve() for arg in config.args]
    return not paths or any(p.is_relative_to(E2E_DIR) or E2E_DIR.is_relative_to(p) for p in paths)


def _lanes_for_workers(config: pytest.Config, workers: int) -> None:
    """With the switch under pytest-xdist, each worker starts a cluster and a real node of
    its own: start each in a lane (``lane-ns.sh``, network and mount namespaces of its
    own), build the images first (a lane has no network), and hold the machine session
    here, which compares the machine once every lane has ended."""
    say("building the images the lanes import (a lane has no network)")
    realnode_lanes.prebuild(realnode_lane=False)
    python = shlex.join([str(realnode_lanes.WRAPPER), sys.executable])
    config.option.tx = [f"popen//python={python}"] * workers
    stack = contextlib.ExitStack()
    try:
        session = stack.enter_context(realnode_lanes.machine_session())
    except realnode_lanes.LaneError as error:
        raise pytest.UsageError(str(error)) from None
    config.stash[_MACHINE] = (stack, session)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    # On the xdist controller, once every worker (lane) has ended: the machine session's
    # comparison fails the run when the machine is not as it was.
    held = session.config.stash.get(_MACHINE, None)
    if held is None:
        return
    stack, machine = held
    del session.config.stash[_MACHINE]
    stack.close()
    shared = "compared here" if machine.last else "left to the last session out"
    session.config.stash[_MACHINE_DIFFERS] = (json.dumps(machine.differences), shared)
    if machine.differences:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # This hook sees the whole session's items, before `-m` deselects any (so `-m e2e`
    # sees the marker); mark only the ones under e2e/.
    for item in items:
        if item.path.is_relative_to(E2E_DIR):
            item.add_marker(pytest.mark.e2e)


def pytest_collection_finish(session: pytest.Session) -> None:
    # After `-m` has deselected: a test that starts a real node of its own cannot run
    # beside the session's cluster, which holds this lane's node (a skip marker is read
    # when the test is set up).
    selected = session.items
    if not _session_on_the_real_node() or not any(map(_uses_the_session_cluster, selected)):
        return
    for item in selected:
        if item.get_closest_marker("realnode"):
            item.add_marker(pytest.mark.skip(reason=_REALNODE_TESTS_SKIPPED))


def _uses_the_session_cluster(item: pytest.Item) -> bool:
    return "cluster_info" in getattr(item, "fixturenames", ())


_REALNODE_TESTS_SKIPPED = (
    "this test starts a real node of its own, and this run's session cluster holds this "
    "lane's real node (its bridge and fixed paths): run it in a pytest of its own, "
    "`pytest -m realnode` (`make realnode`; `make test` runs that lane beside the others)"
)


def _session_on_the_real_node() -> bool:
    """Whether the session's cluster is a local one on the real node (no cluster named)."""
    return existing_kubeconfig() is None


@pytest.fixture(scope="session", autouse=True)
def _the_machines_real_node(request: pytest.FixtureRequest) -> Iterator[None]:
    """The real node's tests hold the machine for the whole session, before any of them
    snapshots it: the one real node outside a lane, or a share of the machine session in
    one (see ``realnode.machine``)."""
    items = request.session.items
    wanted = any(item.get_closest_marker("realnode") for item in items) or any(
        map(_uses_the_session_cluster, items)
    )
    if not wanted or existing_kubeconfig() is not None or os.geteuid() != 0:
        yield
        return
    with realnode.machine():
        yield


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    differs, shared = config.stash.get(_MACHINE_DIFFERS, (None, ""))
    if differs == "{}":
        terminalreporter.write_line(
            f"[agentchain] the machine is as it was before the lanes (shared part {shared})"
        )
    elif differs is not None:
        terminalreporter.write_line(f"[agentchain] the machine differs after the lanes: {differs}")
    kept = config.stash.get(_KEPT_WORKDIR, None)
    if kept is not None:
        terminalreporter.write_line(f"[agentchain] cluster logs kept in {kept / 'logs'}")


@pytest.fixture(scope="session")
def cluster_info(request: pytest.FixtureRequest) -> Iterator[ClusterInfo]:
    """The session's cluster: a local control plane, real node and Redis, with the e2e
    agent image imported, or AGENTCHAIN_E2E_KUBECONFIG's (see the module's docstring)."""
    if _session_on_the_real_node():
        realnodes.skip_without_root()
    workdir = make_workdir()
    # Kept until proven clean: a failed start-up or teardown leaves it in place too.
    request.config.stash[_KEPT_WORKDIR] = workdir
    with realnodes.cluster_with_agent_image(workdir) as info:
        yield info
    if request.session.testsfailed == 0:
        del request.config.stash[_KEPT_WORKDIR]
    finish_workdir(workdir, succeeded=request.session.testsfailed == 0)


@pytest.fixture(scope="session")
def kube_api(cluster_info: ClusterInfo) -> Iterator[kubernetes.client.ApiClient]:
    """A synchronous Kubernetes API client with the admin kubeconfig."""
    loader = kubernetes.config.new_client_from_config
    api: kubernetes.client.ApiClient = loader(config_file=str(cluster_info.kubeconfig))  # type: ignore[no-untyped-call]
    with api:
        yield api


def _namespace_name(test_name: str) -> str:
    # DNS-1123 label: lowercase alphanumerics and '-', at most 63 characters.
    slug = re.sub(r"[^a-z0-9]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    return f"e2e-{slug}-{secrets.token_hex(3)}"


def _wait_for_default_service_account(core: kubernetes.client.CoreV1Api, name: str) -> None:
    # The API server refuses pods until the namespace's ServiceAccount exists.
    deadline = time.monotonic() + NAMESPACE_READY_TIMEOUT_SECONDS
    while True:
        try:
            core.read_namespaced_service_account("default", name)
            return
        except kubernetes.client.ApiException as error:
            if error.status != 404 or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


@pytest.fixture
def namespace(
    kube_api: kubernetes.client.ApiClient, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh namespace for one test, deleted (not awaited) afterwards."""
    core = kubernetes.client.CoreV1Api(kube_api)
    name = _namespace_name(request.node.name)
    labels = {"app.kubernetes.io/part-of": "agentchain-e2e"}
    body = kubernetes.client.V1Namespace(
        metadata=kubernetes.client.V1ObjectMeta(name=name, labels=labels)
    )
    core.create_namespace(body)
    _wait_for_default_service_account(core, name)
    yield name
    try:
        core.delete_namespace(name)
    except kubernetes.client.ApiException as error:
        if error.status != 404:
            raise


def _pod_host(request: pytest.FixtureRequest) -> str:
    """Where a server that agents reach listens: the session cluster's ``pod_host`` on the
    real node (which starts the cluster first: the bridge must exist to bind its address),
    else loopback: on a named cluster, and for a test that uses no cluster (nothing but
    the test reaches the server then, and no cluster is started for it)."""
    if not _session_on_the_real_node() or "cluster_info" not in request.fixturenames:
        return "127.0.0.1"
    info: ClusterInfo = request.getfixturevalue("cluster_info")
    return info.pod_host


@pytest.fixture
def model_standin(request: pytest.FixtureRequest) -> Iterator[ModelStandIn]:
    """A running stand-in model server, listening where agents reach it; the test fails
    if an exchange broke an SDK type."""
    with ModelStandIn(host=_pod_host(request)) as standin:
        yield standin
        standin.assert_clean()


@pytest.fixture
def github(request: pytest.FixtureRequest) -> Iterator[GitHubStandIn]:
    """A running GitHub API stand-in, listening where agents reach it (an agent with
    GitHub permissions calls the API itself); the test fails if a request broke
    GitHub's description (see ``e2e/github/fixtures.py``)."""
    require_spec()
    with GitHubStandIn(host=_pod_host(request)) as standin:
        yield standin
        standin.assert_clean()


@pytest.fixture
def git_server(
    github: GitHubStandIn,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[GitServer]:
    """A smart-HTTP git server that checks ``github``'s installation tokens, listening
    where agents and workspace containers reach it."""
    with GitServer(github, tmp_path / "git", host=_pod_host(request)) as server:
        yield server
