"""The chart's admission policy on the real API server: the operator's own account can
create only the Jobs and Secrets the operator builds.

Aspects covered:
* ``helm template`` renders three ValidatingAdmissionPolicies (Jobs, Secrets, Pods) and
  their bindings (admissionregistration.k8s.io/v1), matched on the operator's
  ServiceAccount alone; applied for real they compile (no type-checking warning);
* the Jobs the operator builds pass, as its account: a plain agent, one with an
  ``envFrom`` Secret and a ServiceAccount its AiAgent names (both listed in the values),
  a workspace job (init containers, the claim, the job Secret's git token, a
  ``credentialsSecret``), and a workspace's publish Job; so does its job Secret;
* as its account, a Job with a hostPath volume, a privileged container, escalation
  allowed, an added capability, a host namespace (network, PID, IPC), a host port, a
  foreign ServiceAccount, its token automounted, or a Secret it did not make and that is
  not listed (a volume, ``envFrom``, ``secretKeyRef``, ``imagePullSecrets``), another
  claim, a Secret of type ServiceAccount token, or a Pod, is refused with the policy's
  message;
* the same Jobs from anybody else (the admin) are not the policy's business.

Every request is a server-side dry run: admission runs in full and nothing is created.
``test_rbac_namespaced.py`` runs a whole chain under the same policy.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from agentchain.core.rules import naming
from agentchain.hop.rules import jobspec
from agentchain.models.aiagent import AiAgentSpec
from agentchain.settings import Settings
from agentchain.workspaces.rules import jobmounts
from e2e import admission, charting
from e2e.controlplane.cluster import ClusterInfo

pytestmark = pytest.mark.skipif(
    charting.helm_binary() is None, reason="helm could not be built (build-binaries.sh helm)"
)
RBAC_KINDS = {"ServiceAccount", "Role", "RoleBinding"}
SETTINGS = Settings(api_url="http://agentchain.test:8080")
NONCE = "0123456789abcdef"
Obj = dict[str, Any]


def render_policed(namespace: str, *sets: str) -> tuple[list[Obj], list[Obj]]:
    """The chart for an operator serving ``namespace``: its RBAC and its policies, under a
    release name of the namespace's own (the policies are cluster-scoped)."""
    rendered = charting.render(
        f"operator.namespaces={{{namespace}}}",
        f"fullnameOverride=agentchain-{namespace}"[:63].rstrip("-"),
        *sets,
        namespace=namespace,
    )
    rbac = [m for m in rendered if m["kind"] in RBAC_KINDS]
    policies = [m for m in rendered if m["kind"] in admission.KINDS]
    return rbac, policies


@pytest.fixture
def policed(cluster_info: ClusterInfo, namespace: str) -> Iterator[tuple[str, str, list[Obj]]]:
    """The chart's RBAC and policies for an operator serving ``namespace``; yields the
    namespace, the operator's user name and the policies."""
    info = cluster_info
    rbac, policies = render_policed(
        namespace,
        "admissionPolicy.agentSecrets={llm-keys,git-cred}",
        "admissionPolicy.agentServiceAccounts={agent-sa}",
    )
    assert {m["kind"] for m in policies} == admission.KINDS and len(policies) == 6
    info.kubectl("apply", "-f", "-", input="\n---\n".join(yaml.safe_dump(m) for m in rbac))
    account = charting.only(rbac, "ServiceAccount")["metadata"]["name"]
    user = f"system:serviceaccount:{namespace}:{account}"
    try:
        admission.apply(info, policies, namespace, user)
        yield namespace, user, policies
    finally:
        admission.delete(info, policies)


def _job(agent: Obj | None = None, mounting: jobmounts.Mounting | None = None) -> Obj:
    """A batch Job exactly as the operator builds it (hop/rules/jobspec.py)."""
    spec = AiAgentSpec.model_validate({"triggerName": "coder", **(agent or {})})
    name = "coder-run-1f2e3d4c5b6a"
    inputs = jobspec.JobInputs(
        agentjob_name=name,
        job_name=name,
        namespace="ignored",
        agent=spec,
        chain_id="c0ffee",
        secret_name=naming.job_secret_name(name, NONCE),
        labels={},
        annotations={},
        workspace=mounting,
    )
    # A deep copy: the built Job shares the default security contexts' dicts.
    return copy.deepcopy(jobspec.build_job(inputs, SETTINGS))


def _chain(**over: Any) -> jobmounts.ChainWorkspace:
    fields: dict[str, Any] = {
        "chain_id": "c0ffee",
        "claim_name": jobmounts.claim_name("c0ffee"),
        "repository": "https://git.example/acme/app.git",
        "github": None,
        "ref": None,
        "branch": "agentchain/c0ffee",
        "publish": True,
        **over,
    }
    return jobmounts.ChainWorkspace(**fields)


def _pod(job: Obj) -> Obj:
    pod: Obj = job["spec"]["template"]["spec"]
    return pod


def _hostpath(job: Obj) -> Obj:
    _pod(job)["volumes"].append({"name": "host", "hostPath": {"path": "/etc"}})
    return job


def _agent_container(job: Obj) -> Obj:
    containers: list[Obj] = _pod(job)["containers"]
    return containers[0]


def test_the_operators_own_jobs_pass(
    cluster_info: ClusterInfo, policed: tuple[str, str, list[Obj]]
) -> None:
    namespace, user, _ = policed
    info = cluster_info
    listed = {
        "envFrom": [{"secretRef": {"name": "llm-keys"}}],
        "env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "llm-keys", "key": "k"}}}],
        "serviceAccountName": "agent-sa",
    }
    github = {"github": {"permissions": {"contents": "write"}}}
    own = jobmounts.Mounting(_chain(credentials_secret="git-cred"), False, True)
    on_github = jobmounts.Mounting(_chain(github="acme/app"), True, False)
    tool = jobmounts.tool_of(SETTINGS)
    security = (jobspec.DEFAULT_POD_SECURITY_CONTEXT, jobspec.DEFAULT_SECURITY_CONTEXT)
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u"}
    publish = jobmounts.publish_job(
        "ignored", _chain(), naming.job_secret_name("agentchain-publish-c0ffee", NONCE),
        owner, tool, security,
    )  # fmt: skip
    publish["metadata"].pop("ownerReferences")
    secret: Obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": naming.job_secret_name("coder-run-1f2e3d4c5b6a", NONCE)},
        "type": "Opaque",
        "stringData": {"token": "t"},
    }
    for body in (
        _job(),
        _job(listed),
        _job(github, own),
        _job({**github, "workspace": {"readOnly": True}}, on_github),
        publish,
        secret,
    ):
        assert admission.create_as(info, namespace, user, body) == "", body["metadata"]["name"]


def _privileged(job: Obj) -> None:
    # The API server itself refuses privileged with allowPrivilegeEscalation: false.
    _agent_container(job)["securityContext"].update(privileged=True, allowPrivilegeEscalation=True)


def _escalation(job: Obj) -> None:
    del _agent_container(job)["securityContext"]["allowPrivilegeEscalation"]


def _capability(job: Obj) -> None:
    _agent_container(job)["securityContext"]["capabilities"]["add"] = ["SYS_ADMIN"]


def _host_network(job: Obj) -> None:
    _pod(job)["hostNetwork"] = True


def _host_pid(job: Obj) -> None:
    _pod(job)["hostPID"] = True


def _host_ipc(job: Obj) -> None:
    _pod(job)["hostIPC"] = True


def _host_port(job: Obj) -> None:
    _agent_container(job)["ports"] = [{"containerPort": 8080, "hostPort": 8080}]


def _foreign_account(job: Obj) -> None:
    _pod(job).update(serviceAccountName="cluster-admin-sa", automountServiceAccountToken=True)


def _default_token(job: Obj) -> None:
    _pod(job)["automountServiceAccountToken"] = True


def _secret_volume(job: Obj) -> None:
    _pod(job)["volumes"][0]["secret"]["secretName"] = "db-root"


def _env_from(job: Obj) -> None:
    _agent_container(job)["envFrom"] = [{"secretRef": {"name": "db-root"}}]


def _key_ref(job: Obj) -> None:
    ref = {"secretKeyRef": {"name": "db-root", "key": "password"}}
    _agent_container(job)["env"].append({"name": "P", "valueFrom": ref})


def _pull_secret(job: Obj) -> None:
    # Listed Secrets only: not even the Job's own (it holds the job's token, not a registry's).
    _pod(job)["imagePullSecrets"] = [{"name": "db-root"}]


def _other_claim(job: Obj) -> None:
    claim = {"name": "data", "persistentVolumeClaim": {"claimName": "postgres-data"}}
    _pod(job)["volumes"].append(claim)


MUTATIONS: list[tuple[str, Callable[[Obj], object], str]] = [
    ("hostPath", _hostpath, "no hostPath"),
    ("privileged", _privileged, "no privileged container"),
    ("escalation", _escalation, "allowPrivilegeEscalation: false"),
    ("capability", _capability, "no capability but NET_BIND_SERVICE"),
    ("hostNetwork", _host_network, "no host namespace"),
    ("hostPID", _host_pid, "no host namespace"),
    ("hostIPC", _host_ipc, "no host namespace"),
    ("hostPort", _host_port, "no host port"),
    ("foreign ServiceAccount", _foreign_account, "run as no ServiceAccount"),
    ("default token", _default_token, "run as no ServiceAccount"),
    ("Secret volume", _secret_volume, "reference no Secret but their own"),
    ("envFrom Secret", _env_from, "reference no Secret but their own"),
    ("secretKeyRef", _key_ref, "reference no Secret but their own"),
    ("imagePullSecrets", _pull_secret, "reference no Secret but their own"),
    ("another claim", _other_claim, "no PersistentVolumeClaim but a chain's workspace"),
]


def test_jobs_outside_the_operators_shape_are_refused(
    cluster_info: ClusterInfo, policed: tuple[str, str, list[Obj]]
) -> None:
    namespace, user, policies = policed
    info = cluster_info
    for what, mutate, message in MUTATIONS:
        job = _job()
        mutate(job)
        refused = admission.create_as(info, namespace, user, job)
        assert "denied request" in refused and message in refused, (what, refused)
        # The policy holds the operator's account only: the admin's same Job is admitted.
        assert admission.create_as(info, namespace, None, job) == "", what
    for policy in policies:
        if policy["kind"] != "ValidatingAdmissionPolicy":
            continue
        got = info.kubectl(
            "get", "validatingadmissionpolicy", policy["metadata"]["name"], "-o", "json"
        )
        checking = (json.loads(got.stdout).get("status") or {}).get("typeChecking") or {}
        assert not checking.get("expressionWarnings"), checking


def test_secrets_and_pods_outside_the_operators_shape_are_refused(
    cluster_info: ClusterInfo, policed: tuple[str, str, list[Obj]]
) -> None:
    namespace, user, _ = policed
    info = cluster_info
    token = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": naming.job_secret_name("coder-run-1f2e3d4c5b6a", NONCE),
            "annotations": {"kubernetes.io/service-account.name": "default"},
        },
        "type": "kubernetes.io/service-account-token",
    }
    refused = admission.create_as(info, namespace, user, token)
    assert "Opaque Secrets only" in refused, refused
    named = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db-root"},
        "type": "Opaque",
        "stringData": {"password": "x"},
    }
    assert "named <job>-<16 hex digits>" in admission.create_as(info, namespace, user, named)
    # RBAC refuses a Pod before admission is asked; the policy refuses it too.
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": _pod(_job())}
    refused = admission.create_as(info, namespace, user, pod)
    assert "creates no Pod" in refused or "cannot create resource" in refused, refused
