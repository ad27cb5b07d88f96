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
