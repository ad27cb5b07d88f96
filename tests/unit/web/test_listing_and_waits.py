"""What one token's reads may cost (issue 14): selectors and the cap on waits.

Aspects covered:
* ``listing.job_selector``: chain and agent become one label selector; no filter is the
  empty selector; a chain id that is no label value, or an empty value, matches nothing
  (None, so no request is made); an agent that is no label value is selected by the
  digest label the operator gives it;
* ``waiting.Waits.slot``: a job token holds at most MAX_WAITS_PER_JOB_TOKEN waits, each
  job token its own; admins share MAX_WAITS_FOR_ADMINS; a released slot is free again,
  also after an error inside it; the refusal is a 429 with reason TooManyWaits.
"""

from __future__ import annotations

import contextlib

import pytest

from agentchain import models
from agentchain.core.rules import naming
from agentchain.store.tokens import TokenScope
from agentchain.web import auth, listing
from agentchain.web.jobapi import waiting
from agentchain.web.responses import ApiError


@pytest.mark.parametrize(
    ("chain", "agent", "expected"),
    [
        pytest.param(None, None, "", id="nothing"),
        pytest.param("abc123", None, f"{models.CHAIN_ID}=abc123", id="chain"),
        pytest.param(None, "ai-dev", f"{models.AGENT_ROLE}=ai-dev", id="agent"),
        pytest.param(
            "abc", "ai-dev", f"{models.CHAIN_ID}=abc,{models.AGENT_ROLE}=ai-dev", id="both"
        ),
        pytest.param("a b", None, None, id="chain-not-a-label"),
        pytest.param("x" * 64, None, None, id="chain-too-long"),
        pytest.param("", None, None, id="chain-empty"),
        pytest.param(None, "", None, id="agent-empty"),
        pytest.param(
            None,
            "a,b=c",
            f"{models.AGENT_ROLE}={naming.label_value('a,b=c')}",
            id="agent-digest-label",
        ),
    ],
)
def test_job_selector(chain: str | None, agent: str | None, expected: str | None) -> None:
    assert listing.job_selector(chain, agent) == expected


def test_a_selector_never_carries_a_comma_or_equals_from_the_query() -> None:
    selector = listing.job_selector(None, "x,evil=1")
    assert selector is not None and selector.count(",") == 0 and selector.count("=") == 1


def job(name: str) -> auth.JobCaller:
    return auth.JobCaller(TokenScope(tenant="ns", job_name=name, chain_id="c", uid="u"))


def hold(waits: waiting.Waits, principal: auth.Principal, n: int) -> contextlib.ExitStack:
    stack = contextlib.ExitStack()
    for _ in range(n):
        stack.enter_context(waits.slot(principal))
    return stack


def test_a_job_token_holds_a_bounded_number_of_waits() -> None:
    waits = waiting.Waits()
    with hold(waits, job("a"), waiting.MAX_WAITS_PER_JOB_TOKEN):
        with pytest.raises(ApiError) as refused, waits.slot(job("a")):
            pass
        assert refused.value.status == 429
        assert refused.value.extra["reason"] == "TooManyWaits"
        with waits.slot(job("b")):  # Another job's token has its own slots.
            pass
    with hold(waits, job("a"), waiting.MAX_WAITS_PER_JOB_TOKEN):
        pass  # All released.


def test_admins_share_their_slots() -> None:
    waits = waiting.Waits()
    with hold(waits, auth.Admin(), waiting.MAX_WAITS_FOR_ADMINS):
        with pytest.raises(ApiError), waits.slot(auth.Admin(("other",))):
            pass


def test_a_slot_is_released_when_its_request_fails() -> None:
    waits = waiting.Waits()
    for _ in range(waiting.MAX_WAITS_PER_JOB_TOKEN + 1):
        with pytest.raises(RuntimeError), waits.slot(job("a")):
            raise RuntimeError("the create failed")
