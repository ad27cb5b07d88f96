"""Build a chain child's AgentJob: a pure function of the parent and the decision.

The sibling of ``jobspec.build_job``: no API calls, so the whole manifest is
asserted in unit tests, and the engine only creates it (AlreadyExists meaning the
decision was applied already: the name is ``naming.child_name(parent, agent)``).

A Skipped or refused child is a real AgentJob that never runs: its
``labrats.work/disposition`` annotation says which (``skipped`` or
``refused:<reason>``) and ``disposition-message`` why, so whoever starts it —
the parent's hop, its own watch event after a crash, the resync — records the same
end from the object alone.
"""

from __future__ import annotations

from typing import Any

from agentchain import models
from agentchain.hop.rules import chains
from agentchain.models.agentjob import AgentJobSpec

Child = chains.Spawn | chains.Skip | chains.Refuse


def disposition(decision: Child) -> dict[str, str]:
    """The annotations that make ``decision``'s child a record that never runs."""
    match decision:
        case chains.Spawn():
            return {}
        case chains.Skip():
            value = "skipped"
        case chains.Refuse():
            value = f"refused:{decision.reason}"
    return {models.DISPOSITION: value, models.DISPOSITION_MESSAGE: decision.message}


def build_child(
    namespace: str, parent: AgentJobSpec, decision: Child, chain_context: str
) -> dict[str, Any]:
    """The child AgentJob ``decision`` creates after a job of spec ``parent``."""
    plan = decision.child
    spec: dict[str, Any] = {
        "agentRole": plan.agent,
        "type": parent.type,
        "origin": "chain",
        "event": parent.event.to_api() if parent.event else None,
        "chainContext": chain_context,
    }
    annotations = {
        **chains.position_annotations(plan.position, plan.parent),
        **disposition(decision),
    }
    return {
        "apiVersion": models.API_VERSION,
        "kind": "AgentJob",
        "metadata": {
            "name": plan.name,
            "namespace": namespace,
            "labels": {
                **chains.position_labels(plan.position, plan.agent),
                **chains.issue_labels(parent.event),
            },
            "annotations": annotations,
        },
        "spec": {k: v for k, v in spec.items() if v is not None},
    }
