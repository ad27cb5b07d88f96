"""Fixtures that run the agentchain operator against the session's cluster.

``operator`` is session-wide (one operator serves every test's namespace);
tests that kill and restart the operator build their own ``OperatorProcess``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e import operating
from e2e.controlplane.cluster import ClusterInfo


@pytest.fixture(scope="session")
def installed(cluster_info: ClusterInfo) -> ClusterInfo:
    operating.install(cluster_info)
    return cluster_info


@pytest.fixture(scope="session")
def operator(installed: ClusterInfo) -> Iterator[operating.OperatorProcess]:
    kubeconfig = operating.operator_kubeconfig(installed, installed.workdir / "operator.kubeconfig")
    op = operating.OperatorProcess(installed, kubeconfig)
    op.start()
    yield op
    op.stop()


@pytest.fixture
def operator_paused(operator: operating.OperatorProcess) -> Iterator[None]:
    """No session operator while the test runs, for in-process tests whose jobs must stay
    as the test leaves them: the session operator serves every namespace and would run
    them. It is started again afterwards for the tests that need it."""
    operator.stop()
    try:
        yield
    finally:
        operator.start()
