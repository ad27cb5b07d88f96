"""What a ``/agentchain`` comment command answers on GitHub: pure, from its verdict.

``web/hooks/commands.py`` applies a command and returns its verdict (``result`` and one
entry per job, each with ``result`` and maybe ``why``; a refusal because of *who*
commented carries ``"sender": True``).  When the operator is a GitHub App and the
delivery names its installation, the engine turns that verdict into:

- **applied** (something approved, rejected, stopping or retried): a ``+1`` reaction
  on the command's comment, nothing else;
- **refused because of the sender** (not an approver, refused by the sender policy, a
  bot): **nothing on GitHub**. A stranger's comment must not make the bot talk or spend
  the App's rate limit; the refusal stays in the operator's log and in
  ``agentchain_comment_commands_total{result="refused"}``;
- **nothing to act on** (no job of that issue, it ended, it awaits no approval, its
  chain still runs, nothing failed): a ``confused`` reaction, and a short reply with the
  reasons only when the commenter is one of the repository's own people (association
  OWNER, MEMBER or COLLABORATOR), so nobody else can make the bot write comments.
  (With nothing to act on, nobody checked the commenter against an agent: a stranger
  may get this reaction, never the reply.)

A reply quotes no untrusted text: only the verb, job names (Kubernetes names) and the
operator's own reasons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

APPLIED = "+1"
NOTHING_DONE = "confused"
TRUSTED_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
MAX_REASONS = 5
"""Reasons listed in a reply; an issue with many jobs gets a short reply anyway."""


@dataclass(frozen=True)
class Answer:
    reaction: str | None
    reply: str | None

    def describe(self) -> str:
        """For the webhook's answer and the log: what GitHub will be told."""
        if self.reaction is None and self.reply is None:
            return "nothing on GitHub (the commenter may not use this command)"
        parts = [f"reaction {self.reaction}"] if self.reaction else []
        return " and ".join([*parts, *(["a reply"] if self.reply else [])]) + " on GitHub"


def sender_refused(jobs: Sequence[Mapping[str, Any]]) -> bool:
    return any(j.get("result") == "refused" and j.get("sender") for j in jobs)


def answer_for(verdict: Mapping[str, Any], association: str) -> Answer:
    """The reaction and reply for a command's ``verdict`` (see the module docstring)."""
    jobs: Sequence[Mapping[str, Any]] = verdict.get("jobs") or []
    if verdict.get("result") == "applied":
        return Answer(APPLIED, None)
    if sender_refused(jobs):
        return Answer(None, None)
    if association.upper() not in TRUSTED_ASSOCIATIONS:
        return Answer(NOTHING_DONE, None)
    return Answer(NOTHING_DONE, reply_for(str(verdict.get("command") or ""), jobs))


def reply_for(verb: str, jobs: Sequence[Mapping[str, Any]]) -> str:
    head = f"`/agentchain {verb}` changed nothing"
    reasons = [
        f"- `{j.get('job')}`: {j.get('why') or j.get('result')}" for j in jobs if j.get("job")
    ]
    if not reasons:
        return f"{head}: no agent job of this issue or pull request to act on."
    more = len(reasons) - MAX_REASONS
    listed = reasons[:MAX_REASONS] + ([f"- and {more} more"] if more > 0 else [])
    return head + ":\n" + "\n".join(listed)
