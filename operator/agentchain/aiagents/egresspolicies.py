"""Keeping each AiAgent's egress NetworkPolicy as its spec and the settings say.

Level-triggered from the AiAgent's handlers (created, changed, operator start): the
whole policy is built again (``rules/egress``) and server-side applied, so a policy
edited or deleted by hand is put back on the agent's next event, and one request per
agent event is the whole cost (none per job). An agent that opts out
(``spec.egress.policy: none``) has its policy deleted; a deleted agent's policy goes
with it through its ownerReference. With the operator's ``agent_egress`` setting off
nothing is read or written, and policies made before stay until deleted by hand.

Where it stands is the AiAgent's ``EgressPolicy`` condition, which ``kubectl describe``
shows and ``kubectl wait --for=condition=EgressPolicy`` waits for: True once the policy is written
(``EgressPolicyApplied``) or deliberately absent (``EgressNotRestricted``), False when
the API server refused it (``EgressPolicyFailed``, e.g. the operator's RBAC lacks
networkpolicies). What goes wrong is also a Warning Event, never a crash: a rule the
operator cannot build (``EgressRuleIgnored``, the rest of the policy still applies,
and the condition's message counts it) or the refusal.
"""

from __future__ import annotations

import logging
from typing import Any

from agentchain.aiagents import conditionwriting
from agentchain.aiagents.rules import egress
from agentchain.core.runtime import Runtime
from agentchain.kube import apierrors, events, workloads
from agentchain.models.aiagent import AiAgent
from agentchain.models.conditions import EGRESS_POLICY, Condition, Reason
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
    policy_name = egress.policy_name(name)
    try:
        if planned.policy is None:
            await workloads.delete_network_policy(namespace, policy_name)
        else:
            await workloads.apply_network_policy(planned.policy)
    except (apierrors.Forbidden, apierrors.Invalid, apierrors.BadRequest) as err:
        # Retrying cannot help until the RBAC or the spec changes, which is a new event.
        log.warning("egress policy of %s/%s: %s", namespace, name, err)
        message = f"The egress NetworkPolicy could not be written: {err}"
        key = f"egress-failed:{generation}:{err.code}"
        await events.emit(obj, "Warning", Reason.EGRESS_POLICY_FAILED, message, key=key)
        await _say(obj, False, Reason.EGRESS_POLICY_FAILED, message)
        return
    if planned.policy is None:
        message = "spec.egress.policy is none: the agent's pods' egress is not restricted"
        await _say(obj, True, Reason.EGRESS_NOT_RESTRICTED, message)
        return
    message = f"NetworkPolicy {policy_name} holds the agent's pods' egress"
    if planned.problems:
        message += f"; {len(planned.problems)} rule(s) ignored (see the Events)"
    await _say(obj, True, Reason.EGRESS_POLICY_APPLIED, message)


async def _say(obj: dict[str, Any], ok: bool, reason: str, message: str) -> None:
    condition = Condition(
        type=EGRESS_POLICY,
        status="True" if ok else "False",
        reason=reason,
        message=message,
        observed_generation=obj["metadata"].get("generation"),
    )
    await conditionwriting.set_conditions(obj, [condition])
