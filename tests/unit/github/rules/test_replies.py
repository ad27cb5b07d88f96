"""What a comment command answers on GitHub (github/rules/replies.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentchain.github.rules.replies import MAX_REASONS, Answer, answer_for

Obj = dict[str, Any]
RESULTS = ["approved", "rejected", "stopping", "retried", "refused", "ignored"]


def _verdict(result: str, *jobs: Obj) -> Obj:
    return {"command": "approve", "result": result, "jobs": list(jobs)}


def test_an_applied_command_gets_a_thumbs_up_and_no_reply() -> None:
    verdict = _verdict("applied", {"job": "a", "result": "approved"})
    assert answer_for(verdict, "NONE") == Answer("+1", None)


def test_a_refused_sender_gets_nothing_on_github_whoever_they_are() -> None:
    refused = {"job": "a", "result": "refused", "why": "mallory may not approve it", "sender": True}
    for association in ("NONE", "OWNER", "CONTRIBUTOR"):
        answer = answer_for(_verdict("refused", refused), association)
        assert answer == Answer(None, None)
        assert answer.describe().startswith("nothing on GitHub")


def test_nothing_to_act_on_is_confused_and_explained_only_to_the_repositorys_people() -> None:
    ended = {"job": "gated-x", "result": "ignored", "why": "it ended Succeeded"}
    owner = answer_for(_verdict("refused", ended), "OWNER")
    assert owner.reaction == "confused" and owner.reply is not None
    assert owner.reply == "`/agentchain approve` changed nothing:\n- `gated-x`: it ended Succeeded"
    assert owner.describe() == "reaction confused and a reply on GitHub"
    assert answer_for(_verdict("refused", ended), "CONTRIBUTOR") == Answer("confused", None)
    none = answer_for(_verdict("no_job"), "member")
    assert none.reply is not None and "no agent job" in none.reply


def test_a_reply_lists_a_bounded_number_of_reasons() -> None:
    jobs = [{"job": f"j{i}", "result": "ignored", "why": "it awaits no approval"} for i in range(9)]
    reply = answer_for(_verdict("refused", *jobs), "OWNER").reply
    assert reply is not None and reply.count("\n- `j") == MAX_REASONS
    assert reply.endswith("- and 4 more")


job = st.fixed_dictionaries(
    {"job": st.text(max_size=8), "result": st.sampled_from(RESULTS)},
    optional={"why": st.text(max_size=20), "sender": st.booleans()},
)


@given(
    st.sampled_from(["applied", "refused", "no_job"]),
    st.lists(job, max_size=6),
    st.sampled_from(["OWNER", "MEMBER", "COLLABORATOR", "CONTRIBUTOR", "NONE", ""]),
)
def test_a_stranger_is_never_replied_to_and_a_refused_sender_never_answered(
    result: str, jobs: list[Obj], association: str
) -> None:
    answer = answer_for(_verdict(result, *jobs), association)
    if association not in ("OWNER", "MEMBER", "COLLABORATOR"):
        assert answer.reply is None
    if result != "applied" and any(j["result"] == "refused" and j.get("sender") for j in jobs):
        assert answer == Answer(None, None)
    if result == "applied":
        assert answer == Answer("+1", None)
