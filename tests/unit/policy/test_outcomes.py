"""When a finished job is settled: nothing left for the operator to do (resync skips it).

Aspects covered:
- a job that handed its chain on to another job record (spawned, skipped or
  refused child) is settled at once: that record completes the chain, so the
  parent must never be completed too;
- a job whose chain ended with it (stopped, none) is settled only once marked complete;
- a job that has not ended, or whose next step is not yet recorded, is not settled.
"""

from __future__ import annotations

import pytest

from agentchain.models.agentjob import AgentJobStatus
from agentchain.policy.outcomes import is_settled


def _status(phase: str | None, action: str | None, complete: bool = False) -> AgentJobStatus:
    raw: dict[str, object] = {"phase": phase, "chainComplete": complete}
    if action is not None:
        raw["next"] = [{"action": action}]
    return AgentJobStatus.model_validate(raw)


@pytest.mark.parametrize("action", ["spawned", "skipped", "refused"])
def test_handing_the_chain_on_settles_the_parent(action: str) -> None:
    assert is_settled(_status("Succeeded", action))


@pytest.mark.parametrize("action", ["stopped", "none"])
def test_a_chain_ending_here_settles_only_once_complete(action: str) -> None:
    assert not is_settled(_status("Failed", action))
    assert is_settled(_status("Failed", action, complete=True))


@pytest.mark.parametrize(("phase", "action"), [("Running", None), ("Succeeded", None)])
def test_unfinished_or_undecided_is_not_settled(phase: str, action: str | None) -> None:
    assert not is_settled(_status(phase, action))
