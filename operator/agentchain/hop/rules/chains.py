"""What a chain does when one of its jobs ends: a pure decision, applied elsewhere.

Shaped like kopf's ``detect_changing_cause``: :func:`next_step` looks at the
finished job, the agents of its namespace and the limits, and returns one value
saying what should happen; it has no side effects.  The handler applies it
(creates the child AgentJob, records a refusal, raises an Event, marks the chain
complete).  Because the decision is pure and the child's name is derived from
the parent and the target agent, re-deciding after a restart or a resync yields
the same child name, and ``AlreadyExists`` means the decision was applied.

Order of the checks, and why:

1. The parent is itself a refusal record → :class:`End`.  A refused job never
   ran, so nothing follows it.  A parent whose own triggerName has become
   ambiguous → :class:`Stop` (``DuplicateTriggerName``): whose ``next`` to follow
   cannot be told.
2. No ``next`` → :class:`End`.
3. Condition not met and ``failurePolicy: stop`` → :class:`Stop`.  Nothing would
   be created, so the target's configuration is irrelevant and not judged.
4. Refusals, for anything that creates a job record (a run under the condition
   or ``notify``, or a Skipped record, which continues with the skipped agent's
   own ``next`` and so could loop too): ``LoopDetected``, then
   ``MaxChainDepthExceeded``, then ``NextAgentNotFound``, then
   ``DuplicateTriggerName`` (two AiAgents hold the target's triggerName: never
   run on one of them), then ``NextAgentDisabled``.  The structural checks come
   first because they depend only on the chain's own immutable metadata: the
   verdict on a looping or too-deep chain does not change when someone edits,
   disables or deletes an agent between two evaluations, and a loop is reported as the cause rather
   than a symptom of it (a deep chain, a disabled agent).
5. :class:`Spawn` (condition met, or ``notify``) or :class:`Skip`.

A chain is a tree, not a line: an agent may delegate (``POST /api/jobs`` with its
job token), and the delegated job runs beside the job that asked for it, in the
same chain.  So :class:`Stop` and :class:`End` end the *branch* of the job they
decide on, and complete the chain only when no other job of the chain is still
open (``Finished.others_open``): a delegated job that ends while the job that
delegated to it still runs ends its own branch, and the chain completes when the
last open job ends and decides, whichever it is (normally the delegating job, which
waited for the answer; the delegated one when the delegating job did not wait).

Every job, Skipped and refusal records included, takes one depth and one path
entry: depth is the number of jobs before it in the chain, so with the default
limit of 10 the job at depth 10 (the 11th) is refused.  A refused child's
position includes the refused agent, so its recorded ``chainPath`` shows what
was attempted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from agentchain import models
from agentchain.core.rules import naming
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import ChainStep, ContextWindow
from agentchain.models.conditions import Reason

Outcome = Literal["succeeded", "failed", "skipped", "cancelled"]

PATH_SEPARATOR = " → "


class ChainMetadataError(ValueError):
    """Chain annotations are present but unreadable; limits cannot be enforced from them."""


@dataclass(frozen=True)
class ChainPosition:
    """Where a job stands in its chain; ``path`` ends with this job's agent."""

    chain_id: str
    depth: int
    path: tuple[str, ...]


@dataclass(frozen=True)
class AgentInfo:
    """What a decision needs to know of an AiAgent."""

    trigger_name: str
    enabled: bool
    manual_next: ChainStep | None
    holders: tuple[str, ...] = ()
    """The AiAgents (object names) with this triggerName when more than one has it."""


@dataclass(frozen=True)
class Finished:
    """A job that ended; ``step`` is the ``next`` of the trigger that started it."""

    name: str
    agent: str
    position: ChainPosition
    outcome: Outcome
    step: ChainStep | None
    refused: bool = False
    ambiguity: str | None = None
    """Why the job's own triggerName resolves to no single AiAgent (then ``step`` is None)."""
    others_open: tuple[str, ...] = ()
    """The chain's other jobs that have not ended and decided yet (running, waiting, or
    ended with their ``next`` not yet written): while any is, this job ends its branch only."""


@dataclass(frozen=True)
class Limits:
    """Chain limits; ``max_jobs`` jobs at most, at depths 0 to ``max_jobs - 1``."""

    max_jobs: int = 10

    def __post_init__(self) -> None:
        if self.max_jobs < 1:
            raise ValueError(f"max_jobs must be at least 1, not {self.max_jobs}")


@dataclass(frozen=True)
class ChildPlan:
    """The job record a decision creates; ``step`` is the child's own manual ``next``."""

    name: str
    agent: str
    parent: str
    position: ChainPosition
    context_window: ContextWindow
    step: ChainStep | None


@dataclass(frozen=True)
class Spawn:
    """Run the child; ``notify`` means failurePolicy notify ran it despite the condition."""

    child: ChildPlan
    notify: bool
    message: str


@dataclass(frozen=True)
class Skip:
    """Record the child as Skipped; its own ``next`` is decided later with outcome skipped,
    which counts as a success."""

    child: ChildPlan
    message: str
    reason: str = Reason.SKIPPED


@dataclass(frozen=True)
class Refuse:
    """Record the child as Failed with ``reason``; the chain ends there."""

    child: ChildPlan
    reason: str
    message: str


@dataclass(frozen=True)
class Stop:
    """The chain stops here (the condition was not met under failurePolicy stop, the job
    was cancelled, or its triggerName became ambiguous); complete unless ``open``."""

    reason: str
    message: str
    open: tuple[str, ...] = ()
    """The chain's other open jobs: when any, only this job's branch stops here."""

    @property
    def completes(self) -> bool:
        return not self.open


@dataclass(frozen=True)
class End:
    """Nothing follows this job: the chain is complete, unless ``open``."""

    message: str
    open: tuple[str, ...] = ()
    """The chain's other open jobs: when any, only this job's branch ends here."""

    @property
    def completes(self) -> bool:
        return not self.open


Decision = Spawn | Skip | Refuse | Stop | End


def summary(decision: Decision) -> dict[str, str | bool]:
    """What ``decision`` does, for its span: ``action`` (as the job's ``status.next``
    names it), ``reason``, the agent and job that come next, and whether it completes
    the chain (a branch's end does not)."""
    match decision:
        case Spawn():
            said: dict[str, str | bool] = {"action": "spawned", "reason": Reason.CHILD_SPAWNED}
        case Skip(reason=reason):
            said = {"action": "skipped", "reason": reason}
        case Refuse(reason=reason):
            said = {"action": "refused", "reason": reason}
        case Stop(reason=reason):
            said = {"action": "stopped", "reason": reason, "completes": decision.completes}
        case End():
            reason = Reason.CHAIN_COMPLETE if decision.completes else Reason.BRANCH_ENDED
            said = {"action": "none", "reason": reason, "completes": decision.completes}
    if isinstance(decision, Spawn | Skip | Refuse):
        said |= {"next_agent": decision.child.agent, "next_job": decision.child.name}
    return said


def condition_met(condition: str, outcome: Outcome) -> bool:
    """Whether a step's condition holds for the parent's outcome.

    A skipped parent counts as a success: skip passes over an agent and the
    chain carries on as if that step had gone well.
    """
    if condition == "always":
        return True
    if condition == "on-success":
        return outcome in ("succeeded", "skipped")
    if condition == "on-failure":
        return outcome == "failed"
    raise ValueError(f"unknown chain condition {condition!r}")


def next_step(parent: Finished, agents: Mapping[str, AgentInfo], limits: Limits) -> Decision:
    """Decide what follows ``parent`` (see the module docstring for the order of checks)."""
    decision = _next_step(parent, agents, limits)
    if not parent.others_open or not isinstance(decision, Stop | End):
        return decision
    # Another branch still runs: this one ends, and the chain goes on in it.
    going_on = f" The chain goes on in {_names(parent.others_open)}."
    if isinstance(decision, End):
        message = decision.message.replace("Chain complete: ", "Branch ends: ", 1)
        return End(message + going_on, open=parent.others_open)
    return Stop(decision.reason, decision.message + going_on, open=parent.others_open)


BRANCH_NAMES_SHOWN = 3


def _names(names: tuple[str, ...]) -> str:
    """At most :data:`BRANCH_NAMES_SHOWN` names, then how many more: a bounded message."""
    shown = ", ".join(sorted(names)[:BRANCH_NAMES_SHOWN])
    more = len(names) - BRANCH_NAMES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def _next_step(parent: Finished, agents: Mapping[str, AgentInfo], limits: Limits) -> Decision:
    if parent.refused:
        return End(f"Chain ends at {parent.name}: it records a refusal and never ran.")
    if parent.outcome == "cancelled":  # Stopped or superseded: nothing follows.
        return Stop(Reason.STOPPED, f"Chain stops at {parent.name}: it was cancelled.")
    if parent.ambiguity is not None:
        message = f"Chain stops at {parent.name}: {parent.ambiguity}"
        return Stop(Reason.DUPLICATE_TRIGGER_NAME, message)
    step = parent.step
    if step is None:
        return End(f"Chain complete: {parent.agent} has no next step.")
    met = condition_met(step.condition, parent.outcome)
    unmet = (
        f"Condition {step.condition} not met ({parent.agent} {parent.outcome}); "
        f"failurePolicy {step.failure_policy}"
    )
    if not met and step.failure_policy == "stop":
        return Stop(Reason.CHAIN_STOPPED, f"{unmet} ends the chain.")
    refusal = _refusal(parent, step, agents, limits)
    if refusal is not None:
        return refusal
    child = _plan(parent, step, agents[step.agent_trigger_name].manual_next)
    target = step.agent_trigger_name
    if met:
        return Spawn(child, notify=False, message=f"{_describe(parent)} → running {target}.")
    if step.failure_policy == "skip":
        return Skip(
            child, f"{unmet} passes over {target}; its own next follows as if it succeeded."
        )
    return Spawn(child, notify=True, message=f"{unmet} runs {target} anyway.")


def _refusal(
    parent: Finished, step: ChainStep, agents: Mapping[str, AgentInfo], limits: Limits
) -> Refuse | None:
    target = step.agent_trigger_name
    child = _plan(parent, step, None)
    path = PATH_SEPARATOR.join(child.position.path)
    if target in parent.position.path:
        return Refuse(child, Reason.LOOP_DETECTED, f"Loop detected: {path}")
    if child.position.depth >= limits.max_jobs:
        return Refuse(
            child,
            Reason.MAX_CHAIN_DEPTH_EXCEEDED,
            f"Max chain depth exceeded: {target} would be job {child.position.depth + 1} "
            f"of at most {limits.max_jobs}: {path}",
        )
    info = agents.get(target)
    if info is None:
        return Refuse(
            child,
            Reason.NEXT_AGENT_NOT_FOUND,
            f"Next agent not found: no AiAgent has triggerName {target}: {path}",
        )
    if len(info.holders) > 1:
        return Refuse(
            child,
            Reason.DUPLICATE_TRIGGER_NAME,
            f"Next agent ambiguous: triggerName {target} is used by AiAgents "
            f"{', '.join(info.holders)}; none is run: {path}",
        )
    if not info.enabled:
        return Refuse(
            child,
            Reason.NEXT_AGENT_DISABLED,
            f"Next agent disabled: {target} has enabled: false: {path}",
        )
    return None


def _plan(parent: Finished, step: ChainStep, child_step: ChainStep | None) -> ChildPlan:
    target = step.agent_trigger_name
    position = ChainPosition(
        chain_id=parent.position.chain_id,
        depth=parent.position.depth + 1,
        path=(*parent.position.path, target),
    )
    return ChildPlan(
        name=naming.child_name(parent.name, target),
        agent=target,
        parent=parent.name,
        position=position,
        context_window=step.context_window,
        step=child_step,
    )


def _describe(parent: Finished) -> str:
    return f"Chain {parent.position.chain_id}: {parent.agent} {parent.outcome}"


def root_position(chain_id: str, agent: str) -> ChainPosition:
    """The position of the job that starts a chain."""
    return ChainPosition(chain_id=chain_id, depth=0, path=(agent,))


def position_from_annotations(annotations: Mapping[str, str]) -> ChainPosition | None:
    """Read a job's position back from its annotations.

    ``None`` when the job carries no chain id (it is in no chain yet).  Present
    but unreadable metadata raises :class:`ChainMetadataError` rather than
    returning ``None``: treating a damaged job as a fresh root would reset its
    depth and path and so defeat the loop and depth limits.  A depth that
    disagrees with the path is read as the larger of the two, for the same reason.
    """
    chain_id = annotations.get(models.CHAIN_ID)
    if chain_id is None:
        return None
    if not chain_id:
        raise ChainMetadataError(f"{models.CHAIN_ID} is empty")
    path = _parse_path(annotations.get(models.CHAIN_PATH))
    depth = _parse_depth(annotations.get(models.CHAIN_DEPTH))
    return ChainPosition(chain_id=chain_id, depth=max(depth, len(path) - 1), path=path)


def _parse_path(raw: str | None) -> tuple[str, ...]:
    try:
        value = json.loads(raw if raw is not None else "")
    except json.JSONDecodeError as exc:
        raise ChainMetadataError(f"{models.CHAIN_PATH} is not a JSON list: {raw!r}") from exc
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        raise ChainMetadataError(f"{models.CHAIN_PATH} is not a list of agents: {raw!r}")
    return tuple(value)


def _parse_depth(raw: str | None) -> int:
    if raw is None or not raw.isascii() or not raw.isdigit():
        raise ChainMetadataError(f"{models.CHAIN_DEPTH} is not a depth: {raw!r}")
    return int(raw)


def position_annotations(pos: ChainPosition, parent: str | None) -> dict[str, str]:
    """Annotations recording ``pos`` (and the parent job, unless this is a root)."""
    annotations = {
        models.CHAIN_ID: pos.chain_id,
        models.CHAIN_DEPTH: str(pos.depth),
        models.CHAIN_PATH: json.dumps(list(pos.path), separators=(",", ":")),
    }
    if parent is not None:
        annotations[models.PARENT_JOB] = parent
    return annotations


def issue_labels(event: JobEvent | None) -> dict[str, str]:
    """The ``labrats.work/github-issue`` label of a job whose event names an issue or PR."""
    if event is None or not event.repository or event.number is None:
        return {}
    return {models.GITHUB_ISSUE: naming.issue_label(event.repository, event.number)}


def position_labels(pos: ChainPosition, agent: str) -> dict[str, str]:
    """Labels that make a chain selectable; the chain id must already be a label value.

    The chain id is not rewritten (``-l chain-id=<status.chainId>`` must find the
    chain), so an invalid one is an error; :func:`naming.chain_id_for` never makes
    one.  The agent is made label-safe if needed (trigger names already are).
    """
    if not pos.chain_id or not naming.is_label_value(pos.chain_id):
        raise ValueError(f"chain id {pos.chain_id!r} is not a valid label value")
    return {models.CHAIN_ID: pos.chain_id, models.AGENT_ROLE: naming.label_value(agent)}
