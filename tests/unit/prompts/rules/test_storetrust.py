"""Whose word a store entry is (``agentchain.prompts.rules.storetrust``).

Aspects covered: the mark of a job's writes follows its chain's event (none or not from
GitHub: trusted; from GitHub: the sender's association and login); a reader's sender
policy judges a mark exactly as it judges a delegation's event (association, bots);
an entry without a mark, or with one this code does not make, reaches no prompt.
"""

from __future__ import annotations

import pytest

from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import SenderPolicy
from agentchain.prompts.rules import storetrust

STRICT = SenderPolicy()
OPEN = SenderPolicy(allowed_associations=["OWNER", "NONE"], allow_bots=True)


def _event(login: str, association: str | None) -> JobEvent:
    return JobEvent(source="github", repository="o/r", sender=login, sender_association=association)


def test_the_mark_follows_the_chains_event() -> None:
    assert storetrust.mark_of(None) == storetrust.TRUSTED
    assert storetrust.mark_of(JobEvent(source="manual")) == storetrust.TRUSTED
    assert storetrust.mark_of(_event("octo", "member")) == "github:MEMBER:octo"
    assert storetrust.mark_of(_event("octo", None)) == "github:NONE:octo"


@pytest.mark.parametrize(
    ("mark", "strict", "open_"),
    [
        (storetrust.TRUSTED, True, True),
        ("github:OWNER:octo", True, True),
        ("github:NONE:drive-by", False, True),
        ("github:OWNER:helper[bot]", False, True),
        (None, False, False),
        ("github", False, False),
        ("admin", False, False),
    ],
)
def test_a_readers_sender_policy_judges_the_mark(
    mark: str | None, strict: bool, open_: bool
) -> None:
    assert storetrust.admits(mark, STRICT) is strict
    assert storetrust.admits(mark, OPEN) is open_
    assert storetrust.admits(mark, None) is strict  # No policy: the default one.
    shown = storetrust.shown("v", mark, STRICT)
    assert shown == ("v" if strict else storetrust.WITHHELD)
