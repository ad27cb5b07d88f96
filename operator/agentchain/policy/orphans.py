"""What to do with a batch Job that has no owner: a pure decision.

A chain child's batch Job is created beside the child AgentJob, before the
AgentJob's uid exists to own it, and owned a few milliseconds later.  A crash in
between leaves it ownerless; whoever sees it decides from what its AgentJob says.
"""

from __future__ import annotations

from typing import Any, Literal

from agentchain.models import GROUP
from agentchain.models.agentjob import TERMINAL_PHASES

Verdict = Literal["adopt", "delete", "wait"]
GRACE_SECONDS = 60.0
"""How long an ownerless Job may wait for its AgentJob to appear (a replay of the
parent's step re-creates the same child within seconds of a restart)."""


def verdict(job_name: str, age_seconds: float, agentjob: dict[str, Any] | None) -> Verdict:
    """``adopt`` when the AgentJob launched, or is about to launch, this very Job;
    ``delete`` when it never will (another Job, ended, a record that never runs, or
    gone past the grace period); ``wait`` while it may still appear."""
    if agentjob is None:
        return "delete" if age_seconds >= GRACE_SECONDS else "wait"
    annotations = (agentjob.get("metadata") or {}).get("annotations") or {}
    if f"{GROUP}/disposition" in annotations:
        return "delete"  # A Skipped or refused record: created by a decision, never run.
    status = agentjob.get("status") or {}
    launched = status.get("jobName")
    if launched == job_name:
        return "adopt"
    if launched is None and status.get("phase") not in TERMINAL_PHASES:
        return "adopt"  # Its start will find this Job (AlreadyExists) and use it.
    return "delete"
