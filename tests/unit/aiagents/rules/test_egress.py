"""The egress NetworkPolicy of an AiAgent, as the pure rules build it."""

from __future__ import annotations

from typing import Any

import pytest

from agentchain.aiagents.rules import egress
from agentchain.models.aiagent import AiAgentSpec
from agentchain.settings import Settings

Obj = dict[str, Any]
NS = "team-a"
UID = "0000-uid"
DNS_PORTS = [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]


def _settings(**over: Any) -> Settings:
    base: dict[str, Any] = {
        "agent_egress": True,
        "api_url": "http://agentchain.agentchain-system.svc:8080",
        "listen_port": 8080,
    }
    return Settings(**{**base, **over})


def _spec(**fields: Any) -> AiAgentSpec:
    return AiAgentSpec.model_validate({"triggerName": "triage", **fields})


def _policy(spec: AiAgentSpec | None = None, settings: Settings | None = None) -> Obj:
    planned = egress.plan("triage-agent", NS, UID, spec or _spec(), settings or _settings())
    assert planned.policy is not None
    return planned.policy


def _namespace_peer(namespace: str, **labels: str) -> Obj:
    peer: Obj = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}
    if labels:
        peer["podSelector"] = {"matchLabels": labels}
    return peer


def _rules(policy: Obj) -> list[Obj]:
    rules: list[Obj] = policy["spec"]["egress"]
    return rules


def _external(policy: Obj) -> Obj:
    (rule,) = [r for r in _rules(policy) if any("ipBlock" in p for p in r.get("to", []))
               and r["to"][0]["ipBlock"]["cidr"] == "0.0.0.0/0"]  # fmt: skip
    return rule


class TestWhetherThereIsOne:
    def test_off_by_default_in_the_operator(self) -> None:
        plan = egress.plan("a", NS, UID, _spec(), Settings())
        assert plan == egress.Plan(policy=None)

    def test_an_agent_opts_out(self) -> None:
        plan = egress.plan("a", NS, UID, _spec(egress={"policy": "none"}), _settings())
        assert plan.policy is None

    def test_an_agent_that_says_nothing_gets_one(self) -> None:
        assert egress.plan("a", NS, UID, _spec(), _settings()).policy is not None


class TestTheObject:
    def test_owned_by_its_agent_and_named_after_it(self) -> None:
        meta = _policy()["metadata"]
        assert meta["name"] == "agentchain-egress-triage-agent" and meta["namespace"] == NS
        (owner,) = meta["ownerReferences"]
        assert owner == {
            "apiVersion": "labrats.work/v1alpha1", "kind": "AiAgent",
            "name": "triage-agent", "uid": UID, "controller": True,
        }  # fmt: skip
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "agentchain"

    def test_selects_the_pods_of_the_agents_jobs_for_egress_only(self) -> None:
        spec = _policy()["spec"]
        assert spec["podSelector"] == {
            "matchLabels": {"labrats.work/agent": "triage"},
            "matchExpressions": [{"key": "labrats.work/agentjob", "operator": "Exists"}],
        }
        assert spec["policyTypes"] == ["Egress"]

    def test_a_long_name_is_shortened_to_a_valid_unique_one(self) -> None:
        first, second = egress.policy_name("a" * 250), egress.policy_name("a" * 249 + "b")
        assert len(first) <= 253 and len(second) <= 253 and first != second

    def test_built_the_same_twice(self) -> None:
        assert _policy() == _policy()


class TestDns:
    def test_the_cluster_dns_pods_on_53(self) -> None:
        assert _rules(_policy())[0] == {
            "to": [_namespace_peer("kube-system", **{"k8s-app": "kube-dns"})],
            "ports": DNS_PORTS,
        }

    def test_port_53_anywhere_when_the_resolver_is_not_a_pod(self) -> None:
        policy = _policy(settings=_settings(agent_egress_dns_namespace=""))
        assert _rules(policy)[0] == {"ports": DNS_PORTS}


class TestTheJobApi:
    def test_the_operators_pods_on_its_port_when_named(self) -> None:
        settings = _settings(
            agent_egress_operator_namespace="ops",
            agent_egress_operator_pod_labels=("app=agentchain", "tier=operator"),
            listen_port=9090,
        )
        rule = _rules(_policy(settings=settings))[1]
        assert rule == {
            "to": [_namespace_peer("ops", app="agentchain", tier="operator")],
            "ports": [{"port": 9090, "protocol": "TCP"}],
        }

    def test_otherwise_the_namespace_of_the_api_url(self) -> None:
        rule = _rules(_policy())[1]
        assert rule == {
            "to": [_namespace_peer("agentchain-system")],
            "ports": [{"port": 8080, "protocol": "TCP"}],
        }

    def test_an_operator_at_an_address_is_that_address(self) -> None:
        rule = _rules(_policy(settings=_settings(api_url="http://10.9.0.1:18080")))[1]
        assert rule == {
            "to": [{"ipBlock": {"cidr": "10.9.0.1/32"}}],
            "ports": [{"port": 18080, "protocol": "TCP"}],
        }


class TestUrls:
    @pytest.mark.parametrize(
        ("host", "namespace"),
        [
            ("vllm.models.svc", "models"),
            ("vllm.models.svc.cluster.local", "models"),
            ("vllm.models.svc.cluster.local.", "models"),
            ("vllm", NS),
            ("api.anthropic.com", None),
            ("vllm.models", None),  # Ambiguous with a public name: outside.
            ("10.0.0.5", None),
            ("localhost", None),
        ],
    )
    def test_the_namespace_of_a_service_name(self, host: str, namespace: str | None) -> None:
        assert egress.service_namespace(host, NS) == namespace

    def test_an_in_cluster_model_server_is_its_namespace_on_every_port(self) -> None:
        spec = _spec(runtime={"type": "claude-code", "baseUrl": "http://vllm.models.svc:8000/v1"})
        assert {"to": [_namespace_peer("models")]} in _rules(_policy(spec))

    def test_an_external_model_server_adds_its_port_to_the_external_rule(self) -> None:
        spec = _spec(runtime={"type": "codex", "baseUrl": "https://llm.example.com:8443/v1"})
        ports = [p["port"] for p in _external(_policy(spec))["ports"]]
        assert ports == [443, 8443]

    def test_a_model_server_at_an_address_is_that_address(self) -> None:
        spec = _spec(runtime={"type": "codex", "baseUrl": "http://[fd00::5]:8000"})
        rule = {"to": [{"ipBlock": {"cidr": "fd00::5/128"}}],
                "ports": [{"port": 8000, "protocol": "TCP"}]}  # fmt: skip
        assert rule in _rules(_policy(spec))

    def test_localhost_needs_nothing(self) -> None:
        assert egress.url_rule("http://localhost:8000", NS) == egress.UrlRule()
        assert egress.url_rule("http://127.0.0.1:8000", NS) == egress.UrlRule()

    def test_a_url_that_does_not_parse_adds_nothing(self) -> None:
        assert egress.url_rule("http://host:99999", NS) == egress.UrlRule()

    def test_github_enterprise_and_a_git_server_in_the_cluster(self) -> None:
        settings = _settings(
            github_api_url="https://ghe.example.com:8443/api/v3",
            github_git_url="http://gitea.git.svc:3000",
        )
        policy = _policy(settings=settings)
        assert {"to": [_namespace_peer("git")]} in _rules(policy)
        assert [p["port"] for p in _external(policy)["ports"]] == [443, 8443]

    def test_a_workspace_repository_by_url(self) -> None:
        spec = _spec(workspace={"repository": "https://forge.code.svc/team/repo.git"})
        assert {"to": [_namespace_peer("code")]} in _rules(_policy(spec))


class TestOutside:
    def test_every_address_but_private_link_local_and_loopback_on_443(self) -> None:
        rule = _external(_policy())
        v4, v6 = rule["to"]
        assert v4 == {"ipBlock": {"cidr": "0.0.0.0/0", "except": [
            "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
            "172.16.0.0/12", "192.168.0.0/16",
        ]}}  # fmt: skip
        assert v6 == {"ipBlock": {"cidr": "::/0", "except": ["fc00::/7", "fe80::/10"]}}
        assert rule["ports"] == [{"port": 443, "protocol": "TCP"}]

    def test_the_ports_and_networks_are_settings(self) -> None:
        settings = _settings(
            agent_egress_external_ports=(443, 22), agent_egress_external_except=("10.0.0.0/8",)
        )
        rule = _external(_policy(settings=settings))
        assert [p["port"] for p in rule["ports"]] == [22, 443]
        assert rule["to"] == [
            {"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}},
            {"ipBlock": {"cidr": "::/0"}},
        ]

    def test_settings_from_the_environment_form(self) -> None:
        settings = Settings.model_validate(
            {"agent_egress_external_ports": "443, 22", "agent_egress_dns_pod_labels": "a=b,c"}
        )
        assert settings.agent_egress_external_ports == (443, 22)
        assert egress.labels_of(settings.agent_egress_dns_pod_labels) == {"a": "b", "c": ""}

    @pytest.mark.parametrize("bad", ["not-a-network", "0.0.0.0/0", "::/0"])
    def test_a_network_it_cannot_hold_is_left_out_and_said(self, bad: str) -> None:
        settings = _settings(agent_egress_external_except=("10.0.0.0/8", bad))
        planned = egress.plan("a", NS, UID, _spec(), settings)
        assert planned.policy is not None
        assert _external(planned.policy)["to"][0]["ipBlock"]["except"] == ["10.0.0.0/8"]
        assert planned.problems == (f"agent_egress_external_except: {bad!r} is not a network",)


class TestAllowList:
    def test_a_network_on_its_ports_and_a_namespaces_pods(self) -> None:
        spec = _spec(egress={"allow": [
            {"cidr": "203.0.113.9/24", "ports": [{"port": 5432}, {"port": 53, "protocol": "UDP"}]},
            {"namespace": "metrics", "podLabels": {"app": "otel"}},
        ]})  # fmt: skip
        rules = _rules(_policy(spec))
        assert rules[-2:] == [
            {"to": [{"ipBlock": {"cidr": "203.0.113.0/24"}}],
             "ports": [{"port": 5432, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]},
            {"to": [_namespace_peer("metrics", app="otel")]},
        ]  # fmt: skip

    def test_a_network_that_is_none_is_left_out_and_said(self) -> None:
        spec = _spec(egress={"allow": [{"cidr": "999.1.1.1/8"}, {"cidr": "198.51.100.0/24"}]})
        planned = egress.plan("a", NS, UID, spec, _settings())
        assert planned.policy is not None
        assert _rules(planned.policy)[-1] == {"to": [{"ipBlock": {"cidr": "198.51.100.0/24"}}]}
        assert planned.problems == ("spec.egress.allow[0].cidr '999.1.1.1/8' is not a network",)

    def test_an_entry_repeating_a_default_rule_is_not_doubled(self) -> None:
        model = {"type": "codex", "baseUrl": "http://vllm.models.svc:8000"}
        spec = _spec(egress={"allow": [{"namespace": "models"}]}, runtime=model)
        rules = _rules(_policy(spec))
        assert rules.count({"to": [_namespace_peer("models")]}) == 1

    def test_nothing_else_is_allowed(self) -> None:
        # DNS, the job API, the external rule: an agent with no URLs of its own has
        # exactly these, so any other rule would be a widening no setting asked for.
        assert len(_rules(_policy())) == 3


class TestTheTraceCollector:
    def test_in_the_cluster_it_is_its_namespace(self) -> None:
        url = "http://otel-collector.observability.svc:4318"
        planned = egress.plan("a", NS, UID, _spec(), _settings(), extra_urls=[url])
        assert planned.policy is not None
        assert {"to": [_namespace_peer("observability")]} in _rules(planned.policy)

    def test_none_adds_nothing(self) -> None:
        planned = egress.plan("a", NS, UID, _spec(), _settings(), extra_urls=[""])
        assert planned == egress.plan("a", NS, UID, _spec(), _settings())
