"""The runner's exit codes and the reasons they stand for (``core/rules/runnerexits.py``).

Aspects covered:
- each code maps to its own reason, and no reason is shared (the operator tells them apart
  by code alone);
- 0 and codes the runner never uses (a shell's 1, 2, 127, a signal's 137) have no reason,
  so an ordinary crash is not mistaken for a provider failure;
- the codes stay clear of the shell's and sysexits' ranges;
- docs/agents.md lists every code with its reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentchain.core.rules import runnerexits as exits

DOCS = Path(__file__).resolve().parents[4] / "docs" / "agents.md"


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (exits.EXIT_MODEL_AUTH, "ModelAuthFailed"),
        (exits.EXIT_MODEL_RATE_LIMITED, "ModelRateLimited"),
        (exits.EXIT_MODEL_UNAVAILABLE, "ModelUnavailable"),
        (exits.EXIT_TURN_LIMIT, "TurnLimitReached"),
        (exits.EXIT_MODEL_REQUEST_REJECTED, "ModelRequestRejected"),
        (exits.EXIT_AGENT_FAILED, "AgentFailed"),
        (exits.EXIT_RUNNER_MISCONFIGURED, "RunnerMisconfigured"),
    ],
)
def test_each_code_has_its_reason(code: int, reason: str) -> None:
    found = exits.reason_of_exit(code)
    assert found is not None and found.reason == reason and found.summary


def test_reasons_are_distinct() -> None:
    reasons = [r.reason for r in exits.exit_codes().values()]
    assert len(set(reasons)) == len(reasons) == 7


@pytest.mark.parametrize("code", [0, 1, 2, 64, 78, 126, 127, 137, 143, 255, -9])
def test_other_codes_have_no_reason(code: int) -> None:
    assert exits.reason_of_exit(code) is None


def test_codes_are_clear_of_shell_and_sysexits_ranges() -> None:
    for code in exits.exit_codes():
        assert 79 < code < 126, code


def test_docs_list_every_code() -> None:
    text = DOCS.read_text()
    for code, reason in exits.exit_codes().items():
        assert f"| {code} | `{reason.reason}` |" in text, (code, reason.reason)
