"""AgentJob manifests the web layer creates: roots (webhook, admin) and delegations.

One builder so every entry point puts chain metadata in the same places: the
annotations the engine reads the position from (``hop.rules.chains``), and the
labels that make ``kubectl get agentjobs -l labrats.work/chain-id=<id>`` and the
API's ``?chainId=`` filter select the chain, and the one comment commands select an
issue's jobs by (``labrats.work/github-issue``, derived from the event).
"""

from __future__ import annotations

import time
from typing import Any

from agentchain import models
from agentchain.flow.rules import concurrency
from agentchain.hop.rules import chains
from agentchain.models.agentjob import AgentJobSpec

Obj = dict[str, Any]
MANAGER = "agentchain"


def agentjob_body(
    namespace: str,
    name: str,
    spec: AgentJobSpec,
    position: chains.ChainPosition,
    parent: str | None,
) -> Obj:
    labels = {
        **chains.position_labels(position, spec.agent_role),
        **chains.issue_labels(spec.event),
        models.MANAGED_BY: MANAGER,
    }
    annotations = chains.position_annotations(position, parent)
    # When it was asked for, by the operator's clock: its span starts there.
    annotations[models.CREATED_NS] = str(time.time_ns())
    if parent is None:  # A chain's root: its place in a concurrency group's queue.
        annotations[concurrency.TICKET] = str(time.time_ns() // 1000)
    return {
        "apiVersion": models.API_VERSION,
        "kind": "AgentJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec.to_api(),
    }
