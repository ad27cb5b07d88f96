"""Where a job stands in its chain: positions to and from annotations and labels (SPEC §2).

Aspects covered:
- the root position;
- annotations: the documented keys, JSON path, parent omitted for a root, round trip;
- absent metadata (no position) versus damaged metadata (an error, never a fresh root,
  which would reset the loop and depth limits), for every kind of damage;
- a depth disagreeing with the path is read as the larger, for the same reason;
- labels: chain id and agent, an unusual agent made label-safe, an invalid chain id
  refused.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain import models
from agentchain.core.rules import naming
from agentchain.hop.rules import chains
from agentchain.hop.rules.chains import ChainPosition


def test_root_position() -> None:
    assert chains.root_position("c1", "ai-triage") == ChainPosition("c1", 0, ("ai-triage",))


positions = st.builds(
    ChainPosition,
    chain_id=st.text(min_size=1),
    depth=st.integers(min_value=0, max_value=10_000),
    path=st.lists(st.text(), min_size=1).map(tuple),
).filter(lambda p: p.depth >= len(p.path) - 1)


@given(pos=positions, parent=st.none() | st.text())
def test_annotations_round_trip(pos: ChainPosition, parent: str | None) -> None:
    annotations = chains.position_annotations(pos, parent)
    assert chains.position_from_annotations(annotations) == pos
    assert annotations.get(models.PARENT_JOB) == parent


def test_annotations_are_the_documented_keys() -> None:
    pos = ChainPosition("c1", 1, ("ai-triage", "ai-developer"))
    assert chains.position_annotations(pos, "job-1") == {
        models.CHAIN_ID: "c1",
        models.CHAIN_DEPTH: "1",
        models.CHAIN_PATH: '["ai-triage","ai-developer"]',
        models.PARENT_JOB: "job-1",
    }
    assert models.PARENT_JOB not in chains.position_annotations(pos, None)


def test_no_chain_id_means_no_position() -> None:
    assert chains.position_from_annotations({}) is None
    assert chains.position_from_annotations({"other": "x"}) is None


GOOD = {models.CHAIN_ID: "c1", models.CHAIN_DEPTH: "1", models.CHAIN_PATH: '["a","b"]'}


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param({models.CHAIN_ID: ""}, id="empty-chain-id"),
        pytest.param({models.CHAIN_DEPTH: None}, id="no-depth"),
        pytest.param({models.CHAIN_DEPTH: "-1"}, id="negative-depth"),
        pytest.param({models.CHAIN_DEPTH: "one"}, id="word-depth"),
        pytest.param({models.CHAIN_DEPTH: "\u0663"}, id="non-ascii-digit-depth"),
        pytest.param({models.CHAIN_PATH: None}, id="no-path"),
        pytest.param({models.CHAIN_PATH: "a,b"}, id="path-not-json"),
        pytest.param({models.CHAIN_PATH: "[]"}, id="empty-path"),
        pytest.param({models.CHAIN_PATH: '{"a": 1}'}, id="path-not-a-list"),
        pytest.param({models.CHAIN_PATH: '["a", 2]'}, id="path-with-a-number"),
    ],
)
def test_damaged_metadata_is_an_error_not_a_fresh_root(damage: dict[str, str | None]) -> None:
    annotations = {**GOOD, **damage}
    present = {k: v for k, v in annotations.items() if v is not None}
    with pytest.raises(chains.ChainMetadataError):
        chains.position_from_annotations(present)


def test_depth_disagreeing_with_the_path_is_read_as_the_larger() -> None:
    short = chains.position_from_annotations({**GOOD, models.CHAIN_DEPTH: "0"})
    deep = chains.position_from_annotations({**GOOD, models.CHAIN_DEPTH: "7"})
    assert short is not None and short.depth == 1
    assert deep is not None and deep.depth == 7


def test_labels() -> None:
    pos = ChainPosition(naming.chain_id_for("delivery"), 0, ("ai-triage",))
    assert chains.position_labels(pos, "ai-triage") == {
        models.CHAIN_ID: pos.chain_id,
        models.AGENT_ROLE: "ai-triage",
    }


def test_label_for_an_unusual_agent_is_made_safe() -> None:
    labels = chains.position_labels(ChainPosition("c1", 0, ("x",)), "not a label!")
    assert labels[models.AGENT_ROLE] == naming.label_value("not a label!")


@pytest.mark.parametrize("chain_id", ["", "has space", "x" * 64, "-x"])
def test_an_invalid_chain_id_cannot_become_a_label(chain_id: str) -> None:
    with pytest.raises(ValueError, match="not a valid label value"):
        chains.position_labels(ChainPosition(chain_id, 0, ("a",)), "a")


def test_chain_annotation_path_is_json() -> None:
    pos = ChainPosition("c1", 2, ("a", "b → c", '"q"'))
    raw = chains.position_annotations(pos, None)[models.CHAIN_PATH]
    assert json.loads(raw) == list(pos.path)
