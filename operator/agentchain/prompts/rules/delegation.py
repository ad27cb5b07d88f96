"""Delegation between running agents: an immutable chain with two refusals (seed 000).

An agent inside a Job may ask the job API for another agent.  The chain of
delegations that led to the caller travels with each job as an immutable
snapshot (``AgentJob.spec.delegation``); extending it returns a new tuple and
never touches the caller's, so every job keeps the exact chain it was started
with, as the seed's ``addStep()`` returns a clone.

The rules are the seed's, checked in the seed's order (loop, then depth):

* The target must not appear anywhere in the chain, as source or as target, nor
  be the caller itself.  This is deliberately conservative: having taken part
  at all, in either role, an agent may not take part again, which rules out
  direct (A → B → A) and indirect (A → B → C → A) loops alike.
* A chain holds at most :data:`MAX_DELEGATION_STEPS` steps.

A refusal is a :class:`DelegationRefused` carrying a machine-readable ``reason``
and the seed's exact message, so the API can answer with a clear error
instead of crashing.

Who may delegate to whom is the target's decision, made by
:func:`check_caller` before the chain is extended.  The sender policy guards only
the root of a chain, so without this a job started by anyone could start any
agent of its namespace with a prompt of its choosing.  The caller's agent may
delegate to the target when

* the target's ``spec.delegation.allowedFrom`` names it (or holds ``"*"``), or
* ``allowChain`` (the default) holds and the caller's agent belongs to one of the
  target's chains: the agents linked to it by ``next`` steps of any trigger, in
  either direction and through any number of steps (the connected component of
  the ``next`` graph among the namespace's agents).  Those agents already hand
  their output to one another, so delegating among them adds no new reach.

Besides, the job carries the GitHub event that started its chain into the
target's prompt, so when that event's recorded sender fails the *target's* sender
policy the delegation is refused too: an agent that strangers may start cannot
pass their text on to an agent that strangers may not start.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from agentchain.aiagents.rules import senderpolicy
from agentchain.models.agentjob import DelegationHop, JobEvent
from agentchain.models.aiagent import ANY_AGENT, AiAgentSpec, DelegationPolicy, SenderPolicy

MAX_DELEGATION_STEPS = 3

RefusalReason = Literal["AlreadyInChain", "MaxDepth", "NotAllowedFrom", "SenderPolicy"]
ALREADY_IN_CHAIN: RefusalReason = "AlreadyInChain"
MAX_DEPTH: RefusalReason = "MaxDepth"
NOT_ALLOWED_FROM: RefusalReason = "NotAllowedFrom"
SENDER_POLICY: RefusalReason = "SenderPolicy"
# Refusals of who may call, as opposed to the chain's shape (loop, depth).
FORBIDDEN_REASONS = frozenset({NOT_ALLOWED_FROM, SENDER_POLICY})


class DelegationRefused(Exception):
    """A delegation the rules forbid; ``reason`` is machine-readable, the message is not."""

    def __init__(self, reason: RefusalReason, message: str) -> None:
        super().__init__(message)
        self.reason: RefusalReason = reason
        self.message = message


def would_loop(chain: Sequence[DelegationHop], source: str, target: str) -> bool:
    """Whether ``target`` already took part in ``chain`` or is the caller itself."""
    if target == source:
        return True
    return any(target in (hop.source, hop.target) for hop in chain)


def extend_delegation(
    chain: Sequence[DelegationHop], source: str, target: str
) -> tuple[DelegationHop, ...]:
    """A new chain with the step ``source → target`` appended, or :class:`DelegationRefused`."""
    if would_loop(chain, source, target):
        raise DelegationRefused(ALREADY_IN_CHAIN, f"Agent '{target}' already in delegation chain")
    if len(chain) >= MAX_DELEGATION_STEPS:
        raise DelegationRefused(MAX_DEPTH, "Maximum delegation depth reached")
    return (*chain, DelegationHop(source=source, target=target))


# --------------------------------------------------------------------------- who may call


def chain_members(agents: Iterable[AiAgentSpec], trigger_name: str) -> frozenset[str]:
    """triggerNames linked to ``trigger_name`` by ``next`` steps, either way, itself included."""
    links: dict[str, set[str]] = {}
    for spec in agents:
        for trigger in spec.event_triggers:
            if trigger.next is not None:
                target = trigger.next.agent_trigger_name
                links.setdefault(spec.trigger_name, set()).add(target)
                links.setdefault(target, set()).add(spec.trigger_name)
    seen = {trigger_name}
    todo = [trigger_name]
    while todo:
        for linked in links.get(todo.pop(), ()):
            if linked not in seen:
                seen.add(linked)
                todo.append(linked)
    return frozenset(seen)


def check_caller(
    source: str, target: AiAgentSpec, agents: Iterable[AiAgentSpec], event: JobEvent | None
) -> None:
    """Whether agent ``source`` may delegate to ``target``; :class:`DelegationRefused` if not.

    ``agents`` are the namespace's agents (the target among them), ``event`` the
    event the caller's job carries into the target's prompt.
    """
    policy = target.delegation or DelegationPolicy()
    allowed = set(policy.allowed_from)
    listed = source in allowed or ANY_AGENT in allowed
    if not listed and not (
        policy.allow_chain and source in chain_members(agents, target.trigger_name)
    ):
        raise DelegationRefused(
            NOT_ALLOWED_FROM,
            f"Agent '{source}' may not delegate to '{target.trigger_name}': it is not in "
            f"{target.trigger_name}'s chains and not in its spec.delegation.allowedFrom",
        )
    refusal = _event_refusal(target, event)
    if refusal is not None:
        raise DelegationRefused(
            SENDER_POLICY,
            f"Agent '{target.trigger_name}' may not receive this chain's GitHub event: {refusal}",
        )


def _event_refusal(target: AiAgentSpec, event: JobEvent | None) -> str | None:
    if event is None or event.source != "github":
        return None
    login = event.sender or ""
    return senderpolicy.association_refusal(
        target.sender_policy or SenderPolicy(),
        event.sender_association or senderpolicy.NO_ASSOCIATION,
        login,
        bot=login.endswith("[bot]"),
    )
