"""The operator under the chart's per-namespace RBAC (issue 14), on the real control plane.

Aspects covered:
* ``helm template`` with ``operator.namespaces`` renders a Role and RoleBinding in each
  namespace and nothing cluster-scoped; applied for real, they are all an operator
  serving that namespace needs: a two-agent chain runs to completion (AgentJobs, batch
  Jobs, pods, logs, the token Secret, Events), with no permission error in its log;
* that operator cannot read anything outside its namespaces (asked as its own account);
* the chart's admission policies are applied too, so a rule that refused a Job or Secret
  the operator builds would fail the chain (``test_admission_policy.py`` tests the rules);
  an AiAgent naming a Secret the values do not list fails its job ``JobRefused``, with the
  policy's message.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from e2e import admission, chaining, charting, operating
from e2e.chaining import agent, root_job, step
from e2e.controlplane.cluster import ClusterInfo

pytestmark = pytest.mark.skipif(
    charting.helm_binary() is None, reason="helm could not be built (build-binaries.sh helm)"
)
RBAC_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}


def test_a_chain_runs_under_the_charts_namespaced_roles(
    operator: operating.OperatorProcess, cluster_info: ClusterInfo, namespace: str
) -> None:
    info = cluster_info
    rendered = charting.render(f"operator.namespaces={{{namespace}}}", namespace=namespace)
    rbac = [m for m in rendered if m["kind"] in RBAC_KINDS]
    assert {m["kind"] for m in rbac} == {"ServiceAccount", "Role", "RoleBinding"}
    info.kubectl("apply", "-f", "-", input="\n---\n".join(yaml.safe_dump(m) for m in rbac))
    account = charting.only(rbac, "ServiceAccount")["metadata"]["name"]
    policies = [m for m in rendered if m["kind"] in admission.KINDS]
    assert len(policies) == 6
    admission.apply(info, policies, namespace, f"system:serviceaccount:{namespace}:{account}")
    kubeconfig = operating.operator_kubeconfig(
        info, info.workdir / f"{namespace}.kubeconfig", account, namespace
    )
    # Can-i as the operator's own account: its namespace yes, the cluster no.
    can = ["--kubeconfig", str(kubeconfig), "auth", "can-i"]
    assert info.kubectl(*can, "watch", "agentjobs", "-n", namespace).stdout.strip() == "yes"
    denied = info.kubectl(*can, "list", "pods", "-A", check=False).stdout.strip()
    assert denied == "no"
    # The session operator serves every namespace: stopped while this one runs.
    operator.stop()
    # Its Lease is in its release namespace, where the chart's Role for leases is.
    env = {"AGENTCHAIN_NAMESPACES": namespace, "AGENTCHAIN_LEADER_ELECTION_NAMESPACE": namespace}
    scoped = operating.OperatorProcess(info, kubeconfig, extra_env=env, name="rbac-namespaced")
    try:
        scoped.start()
        chaining.apply(
            info,
            namespace,
            agent("ns-first", "--no-context", next_=step("ns-second")),
            agent("ns-second", "--no-context"),
            root_job("ns-root", "ns-first"),
        )
        jobs = chaining.wait_chain(info, namespace, "ns-root", 2)
        assert [j["status"]["phase"] for j in jobs] == ["Succeeded", "Succeeded"]
        assert all(j["status"].get("result") for j in jobs), json.dumps(jobs)[:2000]
        log = scoped.log_text()
        for needle in ("Forbidden", "Not enough permissions", "Traceback", " 403"):
            assert needle not in log, needle
        # An AiAgent naming a Secret the chart does not list: its job fails, saying why.
        leaky = agent("ns-leaky", "--no-context")
        leaky["spec"]["envFrom"] = [{"secretRef": {"name": "db-root"}}]
        chaining.apply(info, namespace, leaky, root_job("ns-leaky-root", "ns-leaky"))

        def refused() -> dict[str, Any]:
            got = operating.get_json(info, "agentjob", "ns-leaky-root", "-n", namespace)
            status: dict[str, Any] = got.get("status") or {}
            return status

        operating.wait_until(lambda: refused().get("phase") == "Failed", timeout=60)
        assert refused()["reason"] == "JobRefused", refused()
        assert "reference no Secret but their own" in refused()["message"], refused()
    finally:
        scoped.stop()
        admission.delete(info, policies)
        operator.start()
