"""The Helm chart's manifests against a real API server (server-side dry run).

Aspects covered (issue 7, "Done when"):
* the chart's CRDs apply for real and become Established;
* the rest of the rendered chart passes ``kubectl apply --dry-run=server`` — admission,
  schema validation and RBAC escalation checks included — with the defaults and with the
  optional features on (chart-owned Secrets, emptyDir Redis, dashboard), with an
  external Redis and existing Secrets, with an existing Redis password and the
  (default-on) NetworkPolicies off, and with one replica and no leader election;
* high availability (issue 20): the PodDisruptionBudget and the leader-election Role
  and binding (in the release namespace, in both RBAC modes) pass the dry run too; the
  budget is left out with one replica;
* the dry run creates nothing.

The ServiceMonitor is left out: it needs the Prometheus Operator's CRDs, which a bare
cluster does not have (``tests/unit/test_chart.py`` checks its rendering).  Namespaced
objects go into the test's fresh namespace, so parallel sessions cannot collide (with
``operator.namespaces`` naming it, the per-namespace Role and binding too); the
cluster-scoped ClusterRole and binding are only ever dry-run.
"""

from __future__ import annotations

import pytest

from e2e import charting, operating
from e2e.controlplane.cluster import ClusterInfo

pytestmark = pytest.mark.skipif(
    charting.helm_binary() is None, reason="helm could not be built (build-binaries.sh helm)"
)

VARIANTS = {
    "defaults": (),
    "everything-on": (
        "webhook.secrets={old-secret,new-secret}",
        "adminTokens.tokens={admin-token}",
        "networkPolicy.enabled=true",
        "redis.persistence.enabled=false",
        "operator.dashboard=true",
        # The test's namespace (it must exist): per-namespace Roles instead of a ClusterRole.
        "operator.namespaces={NAMESPACE}",
    ),
    "external-redis-existing-secrets": (
        "redis.enabled=false",
        "externalRedis.existingSecret=redis-credentials",
        "webhook.existingSecret=github-webhook",
        "adminTokens.existingSecret=agentchain-admins",
        "operatorKey.existingSecret=agentchain-operator-key",
    ),
    "existing-redis-password-no-network-policies": (
        "redis.auth.existingSecret=redis-password",
        "networkPolicy.enabled=false",
    ),
    # The bundled Redis as a StatefulSet with replication and Sentinel (issue 20).
    "redis-sentinel": (
        "redis.sentinel.enabled=true",
        "redis.sentinel.replicas=5",
        "redis.sentinel.quorum=3",
    ),
    # One replica without leader election (no PodDisruptionBudget then), external Redis.
    "single-replica-no-election": (
        "replicas=1",
        "leaderElection.enabled=false",
        "redis.enabled=false",
        "externalRedis.existingSecret=redis-credentials",
    ),
}


@pytest.fixture(scope="module")
def chart_crds(cluster_info: ClusterInfo) -> ClusterInfo:
    cluster_info.kubectl("apply", "--server-side", "-f", str(charting.CHART / "crds"))
    operating.wait_established(cluster_info)
    return cluster_info


@pytest.mark.parametrize("sets", VARIANTS.values(), ids=VARIANTS.keys())
def test_rendered_chart_passes_server_side_dry_run(
    chart_crds: ClusterInfo, namespace: str, sets: tuple[str, ...]
) -> None:
    sets = tuple(s.replace("NAMESPACE", namespace) for s in sets)
    rendered = charting.template_text(*sets, namespace=namespace)
    result = chart_crds.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered, check=False)
    assert result.returncode == 0, result.stderr
    applied = [line for line in result.stdout.splitlines() if line.strip()]
    manifests = charting.render(*sets, namespace=namespace)
    assert len(applied) == len(manifests), result.stdout
    assert all(line.endswith("(server dry run)") for line in applied), result.stdout
    kinds = {m["kind"] for m in manifests}
    assert {"Deployment", "Service"} <= kinds
    namespaced = any(s.startswith("operator.namespaces=") for s in sets)
    # The leader-election Lease's Role and binding are there either way.
    rbac = {"Role", "RoleBinding"} | (
        set() if namespaced else {"ClusterRole", "ClusterRoleBinding"}
    )
    assert kinds & {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} == rbac
    single = "replicas=1" in sets
    assert ("PodDisruptionBudget" in kinds) is not single

    # A dry run persists nothing.
    left = chart_crds.kubectl("get", "deployments,services,secrets", "-n", namespace, "-o", "name")
    assert "agentchain" not in left.stdout
