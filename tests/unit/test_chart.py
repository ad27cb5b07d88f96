"""The Helm chart, rendered with the cached helm binary (skipped only if helm can't be built).

Aspects covered (issue 7, SPEC §8):
* ``helm lint --strict`` passes and ``helm template`` renders with defaults and with every
  optional feature on;
* the ClusterRole's rules are exactly ``files/rbac-rules.yaml``, the rules the e2e suite
  runs the operator under, and the binding names the chart's ServiceAccount; with
  ``operator.namespaces`` a Role and RoleBinding per namespace (the namespaced rules) and
  nothing cluster-scoped; namespace patterns refuse to render;
* the chart's CRDs are byte-for-byte the generated ``crds/``;
* every ``AGENTCHAIN_*`` variable of the settings model is set by the Deployment;
* both containers (operator, bundled Redis) run non-root, read-only, without capabilities,
  with seccomp RuntimeDefault and no privilege escalation; probes hit /healthz and /readyz;
* webhook secrets and admin tokens are files from a Secret (chart-owned or existing), with
  the ``*_FILE`` variables pointing at them, and are absent when not configured;
* Redis: bundled with ``--appendonly yes`` on a PVC or emptyDir, or an external URL read
  from a Secret; a release with neither refuses to render;
* Redis authentication (issue 14): the chart's start script, run against Debian's
  redis-server, lets the operator's ACL user in with the Secret's password only, refuses
  the default user, other keys and dangerous commands, never evicts (noeviction under a
  maxmemory) and never puts the password in the pod spec; the operator reads it, and the
  generated operator key, from mounted Secrets (or existing ones);
* the NetworkPolicies are on by default (only the operator reaches Redis); the
  ServiceMonitor is off by default and renders when enabled;
* every top-level value in values.yaml is documented by a comment, and a misspelt value
  is refused by values.schema.json rather than ignored;
* the admission policy: three ValidatingAdmissionPolicies (Jobs, Secrets, Pods) and their
  Deny bindings, matched on the operator's own ServiceAccount, with the listed Secrets and
  accounts as CEL lists; a name that is not one refuses to render
  (e2e/test_admission_policy.py runs them);
* high availability (issue 20): two replicas by default, rolled one at a time
  (RollingUpdate, maxUnavailable 0), spread by a soft pod anti-affinity unless the
  affinity is given; a PodDisruptionBudget when there is more than one replica; the
  Lease Role (``leaderElection`` rules, get/create/update on leases only) in the release
  namespace in both RBAC modes; each pod's identity in the Lease is its own name; more
  than one replica without leader election refuses to render.
"""

from __future__ import annotations

import base64
import json
import re
import secrets as secrets_
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e import charting, operating
from hypothesis import given
from hypothesis import settings as settings_
from hypothesis import strategies as st

from agentchain import settings
from agentchain.core.rules import naming
from agentchain.kube.rules import leadership

ROOT = charting.ROOT
CHART = charting.CHART
LEASE_SUFFIX = "-leader-election"

pytestmark = pytest.mark.skipif(
    charting.helm_binary() is None, reason="helm could not be built (build-binaries.sh helm)"
)


def _container(manifests: list[dict[str, Any]], deployment: str) -> dict[str, Any]:
    spec = charting.only(manifests, "Deployment", deployment)["spec"]["template"]["spec"]
    containers: list[dict[str, Any]] = spec["containers"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


def _pod(manifests: list[dict[str, Any]], deployment: str) -> dict[str, Any]:
    template = charting.only(manifests, "Deployment", deployment)["spec"]["template"]
    spec: dict[str, Any] = template["spec"]
    return spec


def _env(manifests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in _container(manifests, "agentchain")["env"]}


def test_helm_lint_passes() -> None:
    result = charting.helm("lint", "--strict", str(CHART), check=False)
    assert result.returncode == 0, result.stdout + result.stderr


class TestRbac:
    def test_cluster_role_rules_are_the_e2e_rules(self) -> None:
        role = charting.only(charting.render(), "ClusterRole")
        rules = yaml.safe_load((CHART / "files" / "rbac-rules.yaml").read_text())
        assert role["rules"] == rules["namespaced"] + rules["clusterWide"]
        assert role["rules"] == operating.rbac_rules(())

    def test_namespaces_get_a_role_each_and_nothing_cluster_scoped(self) -> None:
        manifests = charting.render("operator.namespaces={team-a,team-b}")
        kinds = {m["kind"] for m in manifests}
        assert not kinds & {"ClusterRole", "ClusterRoleBinding"}
        account = charting.only(manifests, "ServiceAccount")["metadata"]["name"]
        rules = yaml.safe_load((CHART / "files" / "rbac-rules.yaml").read_text())["namespaced"]
        scoped = [m for m in manifests if not m["metadata"]["name"].endswith(LEASE_SUFFIX)]
        roles = {m["metadata"]["namespace"]: m for m in scoped if m["kind"] == "Role"}
        bindings = {m["metadata"]["namespace"]: m for m in scoped if m["kind"] == "RoleBinding"}
        assert sorted(roles) == sorted(bindings) == ["team-a", "team-b"]
        for namespace, role in roles.items():
            assert role["rules"] == rules == operating.rbac_rules(("x",))
            binding = bindings[namespace]
            assert binding["roleRef"] == {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": role["metadata"]["name"],
            }
            assert binding["subjects"] == [
                {"kind": "ServiceAccount", "name": account, "namespace": charting.NAMESPACE}
            ]
        verbs = {v for rule in rules for v in rule["verbs"]}
        assert not any("namespaces" in r["resources"] for r in rules) and "*" not in verbs

    @pytest.mark.parametrize("pattern", ["team-*", "!team-a", "team-?"])
    def test_namespace_patterns_refuse_to_render(self, pattern: str) -> None:
        result = charting.helm(
            "template", "x", str(CHART), "--set", f"operator.namespaces={{{pattern}}}", check=False
        )
        assert result.returncode != 0
        assert "list namespaces by name" in result.stderr

    def test_binding_names_the_operator_service_account(self) -> None:
        manifests = charting.render()
        binding = charting.only(manifests, "ClusterRoleBinding")
        account = charting.only(manifests, "ServiceAccount")
        role = charting.only(manifests, "ClusterRole")
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        assert binding["subjects"] == [
            {
                "kind": "ServiceAccount",
                "name": account["metadata"]["name"],
                "namespace": charting.NAMESPACE,
            }
        ]
        assert _pod(manifests, "agentchain")["serviceAccountName"] == account["metadata"]["name"]

    def test_rbac_can_be_left_to_the_cluster_admin(self) -> None:
        for sets in ((), ("operator.namespaces={team-a}",)):
            kinds = {m["kind"] for m in charting.render("rbac.create=false", *sets)}
            assert not kinds & {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


class TestAdmissionPolicy:
    KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")

    def test_policies_hold_the_operators_account_only(self) -> None:
        manifests = charting.render("serviceAccount.name=robot")
        policies = [m for m in manifests if m["kind"] == self.KINDS[0]]
        bindings = [m for m in manifests if m["kind"] == self.KINDS[1]]
        assert len(policies) == len(bindings) == 3
        user = f"system:serviceaccount:{charting.NAMESPACE}:robot"
        for policy in policies:
            assert policy["apiVersion"] == "admissionregistration.k8s.io/v1"
            assert policy["spec"]["failurePolicy"] == "Fail"
            (condition,) = policy["spec"]["matchConditions"]
            assert condition["expression"] == f"request.userInfo.username == '{user}'"
        named = {b["spec"]["policyName"] for b in bindings}
        assert named == {p["metadata"]["name"] for p in policies}
        assert all(b["spec"]["validationActions"] == ["Deny"] for b in bindings)

    def test_listed_secrets_and_accounts_are_cel_lists(self) -> None:
        manifests = charting.render(
            "admissionPolicy.agentSecrets={anthropic,git-cred}",
            "admissionPolicy.agentServiceAccounts={agent}",
        )
        jobs = charting.only(manifests, self.KINDS[0], "agentchain-operator-jobs")
        variables = {v["name"]: v["expression"] for v in jobs["spec"]["variables"]}
        assert json.loads(variables["agentSecrets"]) == ["anthropic", "git-cred"]
        assert json.loads(variables["agentServiceAccounts"]) == ["agent"]
        default = charting.only(charting.render(), self.KINDS[0], "agentchain-operator-jobs")
        variables = {v["name"]: v["expression"] for v in default["spec"]["variables"]}
        assert variables["agentSecrets"] == variables["agentServiceAccounts"] == "[]"

    def test_a_name_that_is_not_one_refuses_to_render(self) -> None:
        result = charting.helm(
            "template", "x", str(CHART), "--set", "admissionPolicy.agentSecrets={a'b}", check=False
        )
        assert result.returncode != 0 and "agentSecrets" in result.stderr

    def test_every_job_secret_name_the_operator_makes_is_its_own_to_the_policy(self) -> None:
        # The policy knows the operator's job Secrets by their name alone: <the Job's name
        # cut to 46>-<16 hex digits>, the Job's name starting with the part before them.
        policies = charting.render()
        jobs = charting.only(policies, self.KINDS[0], "agentchain-operator-jobs")
        secrets = charting.only(policies, self.KINDS[0], "agentchain-operator-secrets")
        rule = jobs["spec"]["validations"][-1]["expression"]
        found = re.search(r"v\.secret\.secretName\.matches\('([^']+)'\)", rule)
        assert found is not None, rule
        pattern = re.compile(found.group(1))
        assert any(pattern.pattern in v["expression"] for v in secrets["spec"]["validations"])

        @settings_(max_examples=300, deadline=None)
        @given(st.text(min_size=1, max_size=80), st.integers(1, 12))
        def check(agentjob: str, attempt: int) -> None:
            job = naming.attempt_job_name(agentjob, attempt)
            secret = naming.job_secret_name(job, secrets_.token_hex(naming.SECRET_NONCE_BYTES))
            assert pattern.fullmatch(secret), secret
            assert job.startswith(secret[: len(secret) - 17])

        check()

    def test_it_can_be_turned_off(self) -> None:
        kinds = {m["kind"] for m in charting.render("admissionPolicy.enabled=false")}
        assert not kinds & set(self.KINDS)


def test_chart_crds_equal_generated_crds() -> None:
    generated = {p.name: p.read_bytes() for p in (ROOT / "crds").glob("*.yaml")}
    in_chart = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert generated, "crds/ is empty"
    assert in_chart == generated, "run: cp crds/*.yaml charts/agentchain/crds/"


def test_every_setting_read_from_env_is_set_by_the_deployment() -> None:
    # Secrets arrive as files, never as variables; the files' own fields are their paths.
    secret_files = {f"{name}_file" for name in settings.SECRETS}
    wanted = {
        settings.env_name(field + "_file" if field in settings.SECRETS else field)
        for field in settings.Settings.model_fields
        if field not in secret_files
    }
    env = _env(charting.render("webhook.secrets={s1}", "adminTokens.tokens={t1}"))
    assert wanted <= set(env), sorted(wanted - set(env))
    assert not {settings.env_name(name) for name in settings.SECRETS} & set(env)


class TestSecurityContext:
    @pytest.mark.parametrize("deployment", ["agentchain", "agentchain-redis"])
    def test_container_is_locked_down(self, deployment: str) -> None:
        manifests = charting.render()
        ctx = _container(manifests, deployment)["securityContext"]
        pod = _pod(manifests, deployment)["securityContext"]
        assert ctx["readOnlyRootFilesystem"] is True
        assert ctx["allowPrivilegeEscalation"] is False
        assert ctx["capabilities"] == {"drop": ["ALL"]}
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}

    def test_operator_writes_only_to_an_emptydir_tmp(self) -> None:
        manifests = charting.render()
        mounts = {m["mountPath"]: m for m in _container(manifests, "agentchain")["volumeMounts"]}
        volumes = {v["name"]: v for v in _pod(manifests, "agentchain")["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
        assert _env(manifests)["HOME"]["value"] == "/tmp"

    def test_probes_hit_health_endpoints_on_the_internal_port(self) -> None:
        container = _container(charting.render(), "agentchain")
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "internal"}
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "internal"}
        assert container["resources"]["requests"] and container["resources"]["limits"]


class TestSecrets:
    @staticmethod
    def _file_of(manifests: list[dict[str, Any]], var: str) -> tuple[str, str]:
        """(Secret name, key) behind the file a ``*_FILE`` variable points at."""
        path = Path(_env(manifests)[var]["value"])
        container = _container(manifests, "agentchain")
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volume = {v["name"]: v for v in _pod(manifests, "agentchain")["volumes"]}[
            mounts[str(path.parent)]
        ]
        assert [i["path"] for i in volume["secret"]["items"]] == [path.name]
        return volume["secret"]["secretName"], volume["secret"]["items"][0]["key"]

    def test_chart_owned_secrets_hold_one_secret_per_line(self) -> None:
        manifests = charting.render("webhook.secrets={old,new}", "adminTokens.tokens={t1}")
        name, key = self._file_of(manifests, "AGENTCHAIN_WEBHOOK_SECRETS_FILE")
        assert charting.only(manifests, "Secret", name)["stringData"][key] == "old\nnew"
        name, key = self._file_of(manifests, "AGENTCHAIN_ADMIN_TOKENS_FILE")
        assert charting.only(manifests, "Secret", name)["stringData"][key] == "t1"

    def test_existing_secrets_are_mounted_not_rendered(self) -> None:
        manifests = charting.render(
            "webhook.existingSecret=gh-hook",
            "webhook.existingSecretKey=secrets",
            "adminTokens.existingSecret=api-admins",
            "redis.auth.existingSecret=redis-auth",
            "operatorKey.existingSecret=op-key",
        )
        assert not [m for m in manifests if m["kind"] == "Secret"]
        assert self._file_of(manifests, "AGENTCHAIN_WEBHOOK_SECRETS_FILE") == ("gh-hook", "secrets")
        assert self._file_of(manifests, "AGENTCHAIN_ADMIN_TOKENS_FILE") == (
            "api-admins",
            "admin-tokens",
        )
        assert self._file_of(manifests, "AGENTCHAIN_REDIS_PASSWORD_FILE") == (
            "redis-auth",
            "redis-password",
        )
        assert self._file_of(manifests, "AGENTCHAIN_OPERATOR_KEY_FILE") == (
            "op-key",
            "operator-key",
        )
        redis_pod = _pod(manifests, "agentchain-redis")
        [auth] = [v for v in redis_pod["volumes"] if v["name"] == "auth"]
        assert auth["secret"]["secretName"] == "redis-auth"

    def test_nothing_configured_means_no_secret_files(self) -> None:
        # The operator then fails closed: the webhook endpoint answers 503.
        manifests = charting.render()
        env = _env(manifests)
        assert "AGENTCHAIN_WEBHOOK_SECRETS_FILE" not in env
        assert "AGENTCHAIN_ADMIN_TOKENS_FILE" not in env
        # Only what the chart generates: the Redis password and the operator key.
        names = {m["metadata"]["name"] for m in manifests if m["kind"] == "Secret"}
        assert names == {"agentchain-redis", "agentchain-operator-key"}

    def test_generated_secrets_are_random_and_files_not_variables(self) -> None:
        first, second = charting.render(), charting.render()
        for name, key in (
            ("agentchain-redis", "redis-password"),
            ("agentchain-operator-key", "operator-key"),
        ):
            value = base64.b64decode(charting.only(first, "Secret", name)["data"][key])
            assert len(value) >= 32
            assert value != base64.b64decode(charting.only(second, "Secret", name)["data"][key])
            text = yaml.safe_dump([m for m in first if m["kind"] != "Secret"])
            assert value.decode() not in text
        assert self._file_of(first, "AGENTCHAIN_OPERATOR_KEY_FILE") == (
            "agentchain-operator-key",
            "operator-key",
        )
        assert self._file_of(first, "AGENTCHAIN_REDIS_PASSWORD_FILE") == (
            "agentchain-redis",
            "redis-password",
        )


class TestRedis:
    def test_bundled_redis_has_aof_on_a_volume_claim(self) -> None:
        manifests = charting.render()
        script = _container(manifests, "agentchain-redis")["args"][-1]
        assert "--appendonly yes --dir /data" in script
        volumes = {v["name"]: v for v in _pod(manifests, "agentchain-redis")["volumes"]}
        claim = volumes["data"]["persistentVolumeClaim"]["claimName"]
        charting.only(manifests, "PersistentVolumeClaim", claim)
        service = charting.only(manifests, "Service", "agentchain-redis")
        url = _env(manifests)["AGENTCHAIN_REDIS_URL"]["value"]
        assert url == f"redis://agentchain@{service['metadata']['name']}:6379/0"

    def test_without_persistence_redis_uses_an_emptydir(self) -> None:
        manifests = charting.render("redis.persistence.enabled=false")
        volumes = {v["name"]: v for v in _pod(manifests, "agentchain-redis")["volumes"]}
        assert "emptyDir" in volumes["data"]
        assert not [m for m in manifests if m["kind"] == "PersistentVolumeClaim"]

    def test_external_redis_url_comes_from_a_secret(self) -> None:
        url = "rediss://:pw@redis.example:6380/0"
        manifests = charting.render("redis.enabled=false", f"externalRedis.url={url}")
        assert not [m for m in manifests if m["metadata"]["name"].endswith("-redis")]
        ref = _env(manifests)["AGENTCHAIN_REDIS_URL"]["valueFrom"]["secretKeyRef"]
        secret = charting.only(manifests, "Secret", ref["name"])
        assert secret["stringData"][ref["key"]] == url

    def test_no_redis_at_all_refuses_to_render(self) -> None:
        result = charting.helm(
            "template", "x", str(CHART), "--set", "redis.enabled=false", check=False
        )
        assert result.returncode != 0
        assert "set externalRedis.url or externalRedis.existingSecret" in result.stderr


class TestOperatorSettings:
    def test_namespaces_and_agent_defaults_reach_the_operator(self) -> None:
        env = _env(
            charting.render(
                "operator.namespaces={team-a,team-b}",
                "operator.maxChainJobs=5",
                "agents.defaultImage=example/agent:1",
                "agents.defaultCommand={claude,-p}",
            )
        )
        assert env["AGENTCHAIN_NAMESPACES"]["value"] == "team-a,team-b"
        assert env["AGENTCHAIN_MAX_CHAIN_JOBS"]["value"] == "5"
        assert env["AGENTCHAIN_DEFAULT_IMAGE"]["value"] == "example/agent:1"
        assert env["AGENTCHAIN_DEFAULT_COMMAND"]["value"] == "claude,-p"

    def test_agents_default_to_the_operator_image_and_the_in_cluster_api(self) -> None:
        manifests = charting.render("image.tag=1.2.3")
        env = _env(manifests)
        image = _container(manifests, "agentchain")["image"]
        assert env["AGENTCHAIN_DEFAULT_IMAGE"]["value"] == image
        assert env["AGENTCHAIN_API_URL"]["value"] == (
            f"http://agentchain.{charting.NAMESPACE}.svc:8080"
        )

    def test_service_exposes_the_listen_port(self) -> None:
        manifests = charting.render()
        ports = charting.only(manifests, "Service", "agentchain")["spec"]["ports"]
        assert [p["targetPort"] for p in ports] == ["http"]  # Only what may face GitHub.
        assert _env(manifests)["AGENTCHAIN_LISTEN_PORT"]["value"] == "8080"

    def test_metrics_probes_and_dashboard_are_on_the_internal_port(self) -> None:
        manifests = charting.render("service.type=LoadBalancer")
        internal = charting.only(manifests, "Service", "agentchain-internal")["spec"]
        assert internal["type"] == "ClusterIP"
        assert [p["targetPort"] for p in internal["ports"]] == ["internal"]
        container = _container(manifests, "agentchain")
        assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
            "http": 8080,
            "internal": 8081,
        }
        assert _env(manifests)["AGENTCHAIN_INTERNAL_PORT"]["value"] == "8081"


class TestOptionalResources:
    def test_service_monitor_off_and_network_policies_on_by_default(self) -> None:
        kinds = [m["kind"] for m in charting.render()]
        assert "ServiceMonitor" not in kinds and kinds.count("NetworkPolicy") == 2
        kinds = [m["kind"] for m in charting.render("networkPolicy.enabled=false")]
        assert "NetworkPolicy" not in kinds

    def test_service_monitor_scrapes_metrics(self) -> None:
        manifests = charting.render("serviceMonitor.enabled=true")
        endpoint = charting.only(manifests, "ServiceMonitor")["spec"]["endpoints"][0]
        assert endpoint["path"] == "/metrics" and endpoint["port"] == "internal"

    def test_the_internal_port_is_reachable_from_the_namespace_and_named_peers(self) -> None:
        peer = "networkPolicy.internalIngressFrom[0].namespaceSelector.matchLabels.team=mon"
        policy = charting.only(charting.render(peer), "NetworkPolicy", "agentchain")
        public, internal = policy["spec"]["ingress"]
        assert public["ports"][0]["port"] == "http" and "from" not in public
        assert internal["ports"][0]["port"] == "internal"
        assert [p["namespaceSelector"]["matchLabels"] for p in internal["from"]] == [
            {"kubernetes.io/metadata.name": charting.NAMESPACE},
            {"team": "mon"},
        ]

    def test_network_policies_admit_only_the_operator_to_redis(self) -> None:
        manifests = charting.render()
        redis = charting.only(manifests, "NetworkPolicy", "agentchain-redis")
        peers = redis["spec"]["ingress"][0]["from"]
        assert peers[0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "operator"


class TestAgentEgress:
    def test_the_operator_keeps_agent_policies_naming_its_own_pods(self) -> None:
        env = _env(charting.render())
        assert env["AGENTCHAIN_AGENT_EGRESS"]["value"] == "true"
        assert env["AGENTCHAIN_AGENT_EGRESS_OPERATOR_NAMESPACE"]["value"] == charting.NAMESPACE
        pairs = set(env["AGENTCHAIN_AGENT_EGRESS_OPERATOR_POD_LABELS"]["value"].split(","))
        deployment = charting.only(charting.render(), "Deployment", "agentchain")
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert pairs == {f"{k}={v}" for k, v in selector.items()}
        assert env["AGENTCHAIN_AGENT_EGRESS_DNS_POD_LABELS"]["value"] == "k8s-app=kube-dns"
        assert env["AGENTCHAIN_AGENT_EGRESS_EXTERNAL_PORTS"]["value"] == "443"
        assert "169.254.0.0/16" in env["AGENTCHAIN_AGENT_EGRESS_EXTERNAL_EXCEPT"]["value"]

    @pytest.mark.parametrize(
        "switch", ["networkPolicy.enabled=false", "networkPolicy.agentEgress.enabled=false"]
    )
    def test_either_switch_turns_it_off(self, switch: str) -> None:
        assert _env(charting.render(switch))["AGENTCHAIN_AGENT_EGRESS"]["value"] == "false"

    def test_the_operator_may_write_network_policies_but_not_read_them(self) -> None:
        role = charting.only(charting.render(), "ClusterRole", "agentchain")
        (rule,) = [r for r in role["rules"] if "networkpolicies" in r["resources"]]
        assert rule["apiGroups"] == ["networking.k8s.io"]
        assert sorted(rule["verbs"]) == ["create", "delete", "patch"]


def test_every_top_level_value_is_documented() -> None:
    lines = (CHART / "values.yaml").read_text().splitlines()
    undocumented = []
    for i, line in enumerate(lines):
        if not re.match(r"^[A-Za-z]\w*:", line):
            continue
        above = lines[i - 1].strip() if i else ""
        sibling = bool(re.match(r"^[A-Za-z]\w*:", above))
        if not above.startswith("#") and not sibling:
            undocumented.append(line.split(":")[0])
    assert not undocumented


def test_misspelt_value_fails_instead_of_being_ignored() -> None:
    # A silently ignored `webhook.secret` would install an operator that refuses every
    # delivery; values.schema.json makes it an error at install time.
    result = charting.helm("template", "x", str(CHART), "--set", "webhook.secret=abc", check=False)
    assert result.returncode != 0
    assert "additional properties 'secret' not allowed" in result.stderr


class TestHighAvailability:
    def test_two_replicas_rolled_one_at_a_time(self) -> None:
        spec = charting.only(charting.render(), "Deployment", "agentchain")["spec"]
        assert spec["replicas"] == 2
        assert spec["strategy"] == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
        }

    def test_replicas_prefer_different_nodes_unless_told_otherwise(self) -> None:
        manifests = charting.render()
        anti = _pod(manifests, "agentchain")["affinity"]["podAntiAffinity"]
        term = anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
        selector = charting.only(manifests, "Deployment", "agentchain")["spec"]["selector"]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        assert term["labelSelector"] == selector
        custom = charting.render("affinity.nodeAffinity.x=y")
        assert _pod(custom, "agentchain")["affinity"] == {"nodeAffinity": {"x": "y"}}

    def test_several_replicas_without_election_refuse_to_render(self) -> None:
        result = charting.helm(
            "template", "x", str(CHART), "--set", "leaderElection.enabled=false", check=False
        )
        assert result.returncode != 0
        assert "replicas > 1 needs leaderElection.enabled" in result.stderr
        single = charting.render("replicas=1", "leaderElection.enabled=false")
        assert _env(single)["AGENTCHAIN_LEADER_ELECTION"]["value"] == "false"

    def test_disruption_budget_only_with_several_replicas(self) -> None:
        manifests = charting.render()
        budget = charting.only(manifests, "PodDisruptionBudget")
        selector = charting.only(manifests, "Deployment", "agentchain")["spec"]["selector"]
        assert budget["spec"] == {"minAvailable": 1, "selector": selector}
        single = charting.render("replicas=1")
        assert not [m for m in single if m["kind"] == "PodDisruptionBudget"]

    @pytest.mark.parametrize("sets", [(), ("operator.namespaces={team-a}",)])
    def test_lease_role_in_the_release_namespace(self, sets: tuple[str, ...]) -> None:
        manifests = charting.render(*sets)
        lease = [m for m in manifests if m["metadata"]["name"].endswith(LEASE_SUFFIX)]
        role = charting.only(lease, "Role")
        binding = charting.only(lease, "RoleBinding")
        account = charting.only(manifests, "ServiceAccount")["metadata"]["name"]
        rules = yaml.safe_load((CHART / "files" / "rbac-rules.yaml").read_text())
        assert role["metadata"]["namespace"] == charting.NAMESPACE
        assert role["rules"] == rules["leaderElection"] == operating.lease_rules()
        assert role["rules"] == [
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "verbs": ["get", "create", "update"],
            }
        ]
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account, "namespace": charting.NAMESPACE}
        ]

    def test_each_pod_is_its_own_identity_in_the_lease(self) -> None:
        env = _env(charting.render())
        field = {
            k: v.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for k, v in env.items()
        }
        assert field["AGENTCHAIN_LEADER_ELECTION_IDENTITY"] == "metadata.name"
        assert field["AGENTCHAIN_LEADER_ELECTION_NAMESPACE"] == "metadata.namespace"
        assert env["AGENTCHAIN_LEADER_ELECTION"]["value"] == "true"
        assert env["AGENTCHAIN_LEADER_ELECTION_NAME"]["value"] == "agentchain"
        timing = [
            float(env[f"AGENTCHAIN_LEADER_ELECTION_{k}_SECONDS"]["value"])
            for k in ("LEASE", "RENEW_DEADLINE", "RETRY")
        ]
        assert timing == [10.0, 7.0, 2.0]
        assert not leadership.timing_problems(*timing)
