"""The NetworkPolicy that limits where an AiAgent's pods may connect, as a pure function.

One policy per AiAgent (not per job, so a job costs the API server no request for it),
owned by the AiAgent so the garbage collector deletes it with the agent. It selects the
pods of the agent's jobs by the labels every job pod carries (``labrats.work/agent``,
the agent's triggerName, and ``labrats.work/agentjob``), and with ``policyTypes:
[Egress]`` lets them connect only to:

* DNS: UDP and TCP 53 to the cluster's DNS pods (or to any address, when the resolver
  is not a pod);
* the job API: the operator's pods on its port;
* the model endpoint, GitHub's API, the git host, a workspace's repository and the
  trace collector, each by the URL the operator or the AiAgent names (:func:`url_rule`);
* the outside world on the external ports (443, and the ports those URLs name), as one
  ``ipBlock`` of every address except private, link-local and loopback networks:
  NetworkPolicy has no host-name rules, so "GitHub" can only be "not the cluster";
* whatever ``spec.egress.allow`` adds.

**URLs in the cluster.** A Service's DNS name (``<service>.<namespace>.svc[.<domain>]``,
or a bare ``<service>`` of the agent's own namespace) cannot be turned into a pod
selector without reading the Service, and a Service's port is not its pods' port (egress
is checked after kube-proxy rewrote the destination). So such a URL allows every pod of
that namespace on every port; the job API narrows this with the operator's pod labels
and its listen port, which the operator knows. An IP literal is allowed as itself on the
URL's port; a host name outside the cluster is reached through the external rule.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from agentchain import models
from agentchain.core.rules import naming
from agentchain.models.aiagent import AiAgentSpec, EgressAllow
from agentchain.settings import Settings

POLICY_PREFIX = "agentchain-egress-"
NAME_MAX_LENGTH = 253
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
DNS_PORT = 53
DEFAULT_PORTS = {"http": 80, "https": 443}

Obj = dict[str, Any]


@dataclass(frozen=True)
class Plan:
    """The policy to keep for an agent (None: keep none) and what could not go in it."""

    policy: Obj | None
    problems: tuple[str, ...] = ()


def policy_name(agent_name: str) -> str:
    """The agent's policy: its name behind a prefix, shortened with a digest if too long."""
    name = POLICY_PREFIX + agent_name
    if len(name) <= NAME_MAX_LENGTH:
        return name
    digest = hashlib.sha256(agent_name.encode()).hexdigest()[:10]
    return f"{name[: NAME_MAX_LENGTH - 11].rstrip('.-')}-{digest}"


def pod_selector(trigger_name: str) -> Obj:
    """The agent's job pods: its triggerName label, and the AgentJob label every job pod has."""
    return {
        "matchLabels": {models.AGENT_ROLE: naming.label_value(trigger_name)},
        "matchExpressions": [{"key": models.AGENTJOB_LABEL, "operator": "Exists"}],
    }


def service_namespace(host: str, own_namespace: str) -> str | None:
    """The namespace a Service host name lives in, or None when it is not one."""
    if not host or host == "localhost" or _ip(host) is not None:
        return None
    labels = host.lower().rstrip(".").split(".")
    if len(labels) == 1:
        return own_namespace
    if len(labels) >= 3 and labels[2] == "svc":
        return labels[1]
    return None


def labels_of(pairs: Iterable[str]) -> dict[str, str]:
    """``key=value`` settings as a label map; a pair without ``=`` is a label with no value."""
    found: dict[str, str] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        if key.strip():
            found[key.strip()] = value.strip()
    return found


@dataclass(frozen=True)
class UrlRule:
    """What one URL needs: an egress rule of its own, or a port of the external rule."""

    rule: Obj | None = None
    external_port: int | None = None


def url_rule(
    url: str, own_namespace: str, *, pod_labels: Mapping[str, str] | None = None,
    pod_port: int | None = None,
) -> UrlRule:  # fmt: skip
    """The egress a URL needs (module docstring, "URLs in the cluster").

    ``pod_labels`` and ``pod_port`` narrow an in-cluster URL when the caller knows the
    pods behind it (the operator knows its own).
    """
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return UrlRule()
    host = parts.hostname or ""
    address = _ip(host)
    if host == "localhost" or (address is not None and address.is_loopback):
        return UrlRule()
    if address is not None:
        prefix = 32 if address.version == 4 else 128
        rule: Obj = {"to": [{"ipBlock": {"cidr": f"{address}/{prefix}"}}]}
        return UrlRule(rule={**rule, **_ports([port] if port else [])})
    namespace = service_namespace(host, own_namespace)
    if namespace is None:
        return UrlRule(external_port=port)
    return UrlRule(rule=_pods_rule(namespace, pod_labels or {}, pod_port))


def _pods_rule(namespace: str, pod_labels: Mapping[str, str], port: int | None) -> Obj:
    peer: Obj = {"namespaceSelector": _namespace_selector(namespace)}
    if pod_labels:
        peer["podSelector"] = {"matchLabels": dict(pod_labels)}
    return {"to": [peer], **_ports([port] if port else [])}


def plan(
    name: str, namespace: str, uid: str, spec: AiAgentSpec, settings: Settings,
    extra_urls: Sequence[str] = (),
) -> Plan:  # fmt: skip
    """The policy the AiAgent ``name`` should have: None when generation is off for it.

    ``extra_urls`` are more URLs the operator gives every agent pod (the OTLP collector
    its traces go to), allowed like the others.
    """
    if not settings.agent_egress or (spec.egress is not None and spec.egress.policy == "none"):
        return Plan(policy=None)
    rules = [_dns_rule(settings)]
    external = set(settings.agent_egress_external_ports)
    found_urls = _url_rules(namespace, spec, settings)
    found_urls += [url_rule(url, namespace) for url in extra_urls if url]
    for found in found_urls:
        if found.rule is not None and found.rule not in rules:
            rules.append(found.rule)
        if found.external_port is not None:
            external.add(found.external_port)
    external_rule, problems = _external_rule(settings.agent_egress_external_except, external)
    rules.append(external_rule)
    allowed, refused = _allow_rules(spec.egress.allow if spec.egress else [])
    rules.extend(rule for rule in allowed if rule not in rules)
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": policy_name(name),
            "namespace": namespace,
            "labels": {
                models.MANAGED_BY: "agentchain",
                models.AGENT_ROLE: naming.label_value(spec.trigger_name),
            },
            "ownerReferences": [_owner(name, uid)],
        },
        "spec": {
            "podSelector": pod_selector(spec.trigger_name),
            "policyTypes": ["Egress"],
            "egress": rules,
        },
    }
    return Plan(policy=policy, problems=problems + refused)


def _url_rules(namespace: str, spec: AiAgentSpec, settings: Settings) -> list[UrlRule]:
    operator_labels = labels_of(settings.agent_egress_operator_pod_labels)
    if settings.agent_egress_operator_namespace:
        # The job API by the pods the chart names, whatever host its URL gives.
        rule = _pods_rule(
            settings.agent_egress_operator_namespace, operator_labels, settings.listen_port
        )
        api = UrlRule(rule=rule)
    else:
        api = url_rule(
            settings.api_url, namespace, pod_labels=operator_labels, pod_port=settings.listen_port
        )
    found = [
        api,
        url_rule(settings.github_api_url, namespace),
        url_rule(settings.github_git_url, namespace),
    ]  # fmt: skip
    if spec.runtime is not None and spec.runtime.base_url:
        found.append(url_rule(spec.runtime.base_url, namespace))
    repository = spec.workspace.repository if spec.workspace else None
    if repository and repository.startswith("https://"):
        found.append(url_rule(repository, namespace))
    return found


def _dns_rule(settings: Settings) -> Obj:
    ports = {"ports": [{"port": DNS_PORT, "protocol": p} for p in ("UDP", "TCP")]}
    if not settings.agent_egress_dns_namespace:
        return ports
    peer: Obj = {"namespaceSelector": _namespace_selector(settings.agent_egress_dns_namespace)}
    labels = labels_of(settings.agent_egress_dns_pod_labels)
    if labels:
        peer["podSelector"] = {"matchLabels": labels}
    return {"to": [peer], **ports}


def _external_rule(excepted: Sequence[str], ports: set[int]) -> tuple[Obj, tuple[str, ...]]:
    """Every address but ``excepted``, per IP family, on ``ports`` (TCP)."""
    everything = (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))
    blocks: list[Obj] = []
    problems: list[str] = []
    networks = []
    for text in excepted:
        network = _network(text)
        if network is None or network.prefixlen == 0:
            # An except must lie strictly inside its block, or the API server refuses it.
            problems.append(f"agent_egress_external_except: {text!r} is not a network")
        else:
            networks.append(network)
    for whole in everything:
        inside = sorted(str(n) for n in networks if n.version == whole.version)
        block: Obj = {"cidr": str(whole)}
        if inside:
            block["except"] = inside
        blocks.append({"ipBlock": block})
    rule: Obj = {"to": blocks, **_ports(sorted(ports))}
    return rule, tuple(problems)


def _allow_rules(allow: Sequence[EgressAllow]) -> tuple[list[Obj], tuple[str, ...]]:
    rules: list[Obj] = []
    problems: list[str] = []
    for index, entry in enumerate(allow):
        peer: Obj
        if entry.cidr is not None:
            network = _network(entry.cidr)
            if network is None:
                problems.append(f"spec.egress.allow[{index}].cidr {entry.cidr!r} is not a network")
                continue
            peer = {"ipBlock": {"cidr": str(network)}}
        elif entry.namespace is not None:
            peer = {"namespaceSelector": _namespace_selector(entry.namespace)}
            if entry.pod_labels:
                peer["podSelector"] = {"matchLabels": dict(entry.pod_labels)}
        else:
            continue  # The schema requires one of them; an object written around it adds nothing.
        ports = [{"port": p.port, "protocol": p.protocol} for p in entry.ports]
        rules.append({"to": [peer], **({"ports": ports} if ports else {})})
    return rules, tuple(problems)


def _ports(ports: Sequence[int]) -> Obj:
    # No ports: every port, as NetworkPolicy reads a rule without them.
    return {"ports": [{"port": p, "protocol": "TCP"} for p in ports]} if ports else {}


def _namespace_selector(namespace: str) -> Obj:
    return {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}


def _owner(name: str, uid: str) -> Obj:
    return {
        "apiVersion": models.API_VERSION,
        "kind": "AiAgent",
        "name": name,
        "uid": uid,
        "controller": True,
    }


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        return None
