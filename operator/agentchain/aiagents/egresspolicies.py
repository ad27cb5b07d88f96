"""Keeping each AiAgent's egress NetworkPolicy as its spec and the settings say.

Level-triggered from the AiAgent's handlers (created, changed, operator start): the
whole policy is built again (``rules/egress``) and server-side applied, so a policy
edited or deleted by hand is put back on the agent's next event, and one request per
agent event is the whole cost (none per job). An agent that opts out
(``spec.egress.policy: none``) has its policy deleted; a deleted agent's policy goes
with it through its ownerReference. With the operator's ``agent_egress`` setting off
nothing is read or written, and policies made before stay until deleted by hand.

What goes wrong is said on the AiAgent as a Warning Event, never as a crash: a rule
the operator cannot build (``EgressRuleIgnored``, the rest of the policy still
applies) or a policy the API server refuses (``EgressPolicyFailed``, e.g. the
operator's RBAC lacks networkpolicies).
"""

from __future__ import annotations

import logging
from typing import Any

from agentchain.aiagents.rules import egress
from agentchain.core.runtime import Runtime
from agentchain.kube import apierrors, events, workloads
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import Reason
from agentchain.traces import exporting

log = logging.getLogger(__name__)


async def reconcile(obj: dict[str, Any], rt: Runtime) -> None:
    """Bring the AiAgent ``obj``'s egress policy to what it should be."""
    settings = rt.settings
    if not settings.agent_egress:
        return
    meta = obj["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    generation = meta.get("generation")
    agent = AiAgent.model_validate(obj)
    # The pods export their spans where the operator's go (``traces``), when it traces.
    collector = exporting.agent_endpoint() if rt.traces.enabled else ""
    uid = str(meta.get("uid") or "")
    planned = egress.plan(name, namespace, uid, agent.spec, settings, extra_urls=[collector])
    for problem in planned.problems:
        key = f"egress-ignored:{generation}:{problem}"
        await events.emit(obj, "Warning", Reason.EGRESS_RULE_IGNORED, problem, key=key)
    try:
        if planned.policy is None:
            await workloads.delete_network_policy(namespace, egress.policy_name(name))
        else:
            await workloads.apply_network_policy(planned.policy)
    except (apierrors.Forbidden, apierrors.Invalid, apierrors.BadRequest) as err:
        # Retrying cannot help until the RBAC or the spec changes, which is a new event.
        log.warning("egress policy of %s/%s: %s", namespace, name, err)
        message = f"The egress NetworkPolicy could not be written: {err}"
        key = f"egress-failed:{generation}:{err.code}"
        await events.emit(obj, "Warning", Reason.EGRESS_POLICY_FAILED, message, key=key)
