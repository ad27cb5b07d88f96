"""Which jobs hold a chain open when a branch ends (``hop.rules.branches``).

Aspects covered:
- a job that has not decided holds the chain open; one that decided does not;
- a chain step's parent, grandparent or any ancestor whose close a crash cut short
  (undecided, its child there) holds nothing open, whoever ends;
- a job that delegated (its delegated job has a name of its own) stays open;
- the ending job never counts itself;
- for any linear chain with any ancestors' closes cut short, its last job sees nothing
  open (hypothesis).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentchain.core.rules import naming
from agentchain.hop.rules.branches import Member, still_open


def _line(roles: list[str], root: str = "root-1") -> list[str]:
    names = [root]
    for role in roles[1:]:
        names.append(naming.child_name(names[-1], role))
    return names


def test_an_undecided_job_holds_the_chain_open_and_a_decided_one_does_not() -> None:
    ending = Member("helper-1", "helper", decided=False)
    assert still_open(ending, [Member("lead-1", "lead", decided=False), ending]) == ("lead-1",)
    assert still_open(ending, [Member("lead-1", "lead", decided=True)]) == ()


def test_ancestors_cut_short_before_their_close_hold_nothing_open() -> None:
    roles = ["triage", "developer", "reviewer"]
    names = _line(roles)
    chain = [Member(n, r, decided=False) for n, r in zip(names, roles, strict=True)]
    # Both the parent's and the grandparent's close were cut short by a crash.
    assert still_open(chain[-1], chain) == ()


def test_a_job_that_delegated_stays_open_until_it_decides() -> None:
    lead = Member("lead-1", "lead", decided=False)
    delegated = Member("lead-1-asks-researcher", "researcher", decided=False)
    assert still_open(delegated, [lead, delegated]) == ("lead-1",)


def test_a_sibling_branch_still_running_holds_the_chain_open() -> None:
    roles = ["lead", "developer"]
    names = _line(roles)
    running = Member("researcher-2", "researcher", decided=False)
    chain = [Member(names[0], "lead", decided=True), Member(names[1], "developer", False), running]
    assert still_open(chain[1], chain) == ("researcher-2",)


@given(
    st.lists(st.sampled_from(["triage", "developer", "reviewer", "ops"]), min_size=1, max_size=8),
    st.data(),
)
def test_the_last_job_of_a_line_sees_nothing_open(roles: list[str], data: st.DataObject) -> None:
    names = _line(roles)
    decided = data.draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
    chain = [Member(n, r, d) for n, r, d in zip(names, roles, decided, strict=True)]
    last = Member(names[-1], roles[-1], decided=False)
    assert still_open(last, [*chain[:-1], last]) == ()
