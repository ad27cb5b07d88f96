"""Names the operator derives for the objects it creates.

Aspects covered:
- every generated name is a DNS-1123 label of at most 63 characters, for any input;
- names are deterministic (the basis of exactly-once creation);
- child names are unique per (parent, agent), with no ambiguity between the parts;
- names lead with a readable slug of the agent; fall back when nothing is readable;
- chain ids are label values of at most 40 characters;
- batch Job names keep an AgentJob name that is already a label, shorten the others;
- job Secret names are ``<batch Job name>-<nonce>``, a DNS label for any Job name;
- kinds of name never collide (a child and a root name for the same strings differ);
- ``label_value`` keeps valid label values and repairs the others.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.core.rules import naming

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

anything = st.text(max_size=300)
trigger_names = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")


def assert_dns_label(name: str) -> None:
    assert len(name) <= 63, name
    assert DNS_LABEL.fullmatch(name), name


# --- validity ---------------------------------------------------------------------------


@given(parent=anything, agent=anything)
def test_child_name_is_always_a_dns_label(parent: str, agent: str) -> None:
    assert_dns_label(naming.child_name(parent, agent))


@given(agent=anything, seed=anything)
def test_root_job_name_is_always_a_dns_label(agent: str, seed: str) -> None:
    assert_dns_label(naming.root_job_name(agent, seed))


@given(name=anything)
def test_batch_job_and_secret_names_are_always_dns_labels(name: str) -> None:
    assert_dns_label(naming.batch_job_name(name))
    assert_dns_label(naming.job_secret_name(naming.batch_job_name(name), "0123456789abcdef"))


@given(seed=anything)
def test_chain_id_is_a_short_label_value(seed: str) -> None:
    chain_id = naming.chain_id_for(seed)
    assert 0 < len(chain_id) <= 40
    assert LABEL_VALUE.fullmatch(chain_id)


@given(text=anything)
def test_label_value_is_always_valid(text: str) -> None:
    value = naming.label_value(text)
    assert len(value) <= 63
    assert LABEL_VALUE.fullmatch(value)


# --- determinism and uniqueness ----------------------------------------------------------


@given(parent=anything, agent=anything)
def test_names_are_deterministic(parent: str, agent: str) -> None:
    assert naming.child_name(parent, agent) == naming.child_name(parent, agent)
    assert naming.root_job_name(agent, parent) == naming.root_job_name(agent, parent)
    assert naming.chain_id_for(parent) == naming.chain_id_for(parent)


@given(a=st.tuples(anything, anything), b=st.tuples(anything, anything))
def test_distinct_parent_agent_pairs_get_distinct_child_names(
    a: tuple[str, str], b: tuple[str, str]
) -> None:
    if a != b:
        assert naming.child_name(*a) != naming.child_name(*b)


@given(a=anything, b=anything)
def test_distinct_seeds_get_distinct_chain_ids(a: str, b: str) -> None:
    if a != b:
        assert naming.chain_id_for(a) != naming.chain_id_for(b)


def test_parts_cannot_run_into_each_other() -> None:
    assert naming.child_name("ab", "c") != naming.child_name("a", "bc")
    assert naming.root_job_name("ab", "c") != naming.root_job_name("a", "bc")


def test_kinds_of_name_never_share_a_digest() -> None:
    assert naming.child_name("x", "ai-dev") != naming.root_job_name("ai-dev", "x")


def test_many_children_of_one_parent_are_distinct() -> None:
    names = {naming.child_name("parent", f"agent-{i}") for i in range(5000)}
    assert len(names) == 5000


def test_many_children_of_one_agent_are_distinct() -> None:
    names = {naming.child_name(f"parent-{i}", "ai-developer") for i in range(5000)}
    assert len(names) == 5000


# --- readability -----------------------------------------------------------------------


@given(agent=trigger_names, parent=anything)
def test_child_name_starts_with_the_agent_when_room_allows(agent: str, parent: str) -> None:
    name = naming.child_name(parent, agent)
    assert name.startswith(agent[:50].rstrip("-"))


@pytest.mark.parametrize(
    ("agent", "prefix"),
    [
        pytest.param("ai-developer", "ai-developer-", id="trigger-name"),
        pytest.param("AI_Developer", "ai-developer-", id="case-and-underscore"),
        pytest.param("  --ai..dev--  ", "ai-dev-", id="punctuation-collapsed"),
        pytest.param("ünïcødé", "n-c-d-", id="non-ascii-dropped"),
        pytest.param("", "agent-", id="empty-falls-back"),
        pytest.param("äöü", "agent-", id="nothing-readable-falls-back"),
        pytest.param("a" * 100, "a" * 50 + "-", id="long-agent-truncated"),
    ],
)
def test_readable_prefix(agent: str, prefix: str) -> None:
    name = naming.child_name("parent", agent)
    assert name.startswith(prefix)
    assert len(name) == len(prefix) + naming.NAME_DIGEST_LENGTH


def test_root_job_name_reads_as_the_agent() -> None:
    assert naming.root_job_name("ai-triage", "delivery-1").startswith("ai-triage-")


# --- batch Jobs and Secrets --------------------------------------------------------------


@given(name=trigger_names)
def test_batch_job_keeps_an_agentjob_name_that_is_a_label(name: str) -> None:
    assert naming.batch_job_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("my.job.with.dots", id="subdomain-with-dots"),
        pytest.param("x" * 64, id="one-over-the-limit"),
        pytest.param("a" * 253, id="longest-subdomain"),
    ],
)
def test_batch_job_shortens_names_that_are_not_labels(name: str) -> None:
    result = naming.batch_job_name(name)
    assert_dns_label(result)
    assert result != name
    assert naming.batch_job_name(name) == result


def test_job_secret_name_is_the_job_name_and_the_nonce() -> None:
    name = naming.job_secret_name("ai-dev-0123", "0123456789abcdef")
    assert name == "ai-dev-0123-0123456789abcdef"


def test_job_secret_name_of_a_long_job_name_keeps_the_whole_nonce() -> None:
    name = naming.job_secret_name("a" * 50 + "-" + "b" * 12, "0123456789abcdef")
    assert name.endswith("-0123456789abcdef")
    assert_dns_label(name)


def test_generated_names_round_trip_through_batch_job_name() -> None:
    child = naming.child_name("root", "ai-reviewer")
    assert naming.batch_job_name(child) == child


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        pytest.param("ai-dev", True, id="trigger-name"),
        pytest.param("Mixed_Case.v1", True, id="label-punctuation"),
        pytest.param("", True, id="empty-is-a-valid-label-value"),
        pytest.param("-leading", False, id="leading-hyphen"),
        pytest.param("has space", False, id="space"),
        pytest.param("x" * 64, False, id="too-long"),
    ],
)
def test_label_value_keeps_only_valid_values(text: str, kept: bool) -> None:
    assert (naming.label_value(text) == text) is kept


@given(st.text(min_size=1, max_size=120), st.integers(min_value=2, max_value=11))
def test_attempt_job_names_are_distinct_dns_labels(name: str, attempt: int) -> None:
    first = naming.attempt_job_name(name, 1)
    later = naming.attempt_job_name(name, attempt)
    assert first == naming.batch_job_name(name)
    assert naming.is_dns_label(later) and later.endswith(f"-a{attempt}")
    assert later != first and later != naming.attempt_job_name(name, attempt + 1)


def test_a_retry_is_named_after_the_first_attempt() -> None:
    assert naming.attempt_job_name("fix-123", 2) == "fix-123-a2"
    long = "x" * 63
    assert len(naming.attempt_job_name(long, 10)) <= 63
