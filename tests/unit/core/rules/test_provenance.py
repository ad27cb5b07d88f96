"""What an AgentJob's seals cover and what an unsealed claim still counts for
(``agentchain.core.rules.provenance``), with the MACs themselves (``agentchain.store.sealing``).

Aspects covered:
- the sealed parts: every field of the event breaks the event seal and only it; each
  position annotation breaks the position seal and only it; the job's namespace and
  name break both; defaults the API server fills in, the origin, and other annotations
  or labels, break neither; one seal never verifies as the other;
- a position sealed alone (a hand-made root the operator adopts) is placed but its
  event is not vouched for;
- the seal round-trips through the API's JSON, verifies under any configured key (key
  rotation), and not under another operator's key or another purpose's sub-key;
- a copied seal does not verify on another job, nor after the event or the chain
  annotations were edited; a missing or empty seal never verifies;
- an unsealed event is data only: no GitHub access derived, and what is handed on to
  the next job has no installation, subject or head commit;
- a workspace repository other than the event's must be one the agent serves.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain import models
from agentchain.core.rules import provenance
from agentchain.hop.rules import chains
from agentchain.models.agentjob import AgentJobSpec, JobEvent
from agentchain.models.aiagent import Workspace
from agentchain.store import sealing, signing
from agentchain.store.signing import OperatorKeys
from agentchain.web.jobapi import bodies
from agentchain.workspaces.rules import jobmounts

KEYS = OperatorKeys(["operator-key-one"])
EVENT = JobEvent(
    source="github",
    name="issues",
    action="opened",
    repository="octo/app",
    installation_id=42,
    number=7,
    subject="issue",
    title="Fix it",
    body="please",
    labels=["bug"],
)


def _body(event: JobEvent | None = EVENT, origin: str = "github") -> dict[str, Any]:
    spec = AgentJobSpec(agent_role="triage", event=event, origin=origin)  # type: ignore[arg-type]
    position = chains.root_position("c0ffee", "triage")
    return bodies.agentjob_body("team-a", "triage-1", spec, position, None)


def _sealed(body: dict[str, Any] | None = None) -> dict[str, Any]:
    return sealing.seal_job(KEYS, body if body is not None else _body())


def _both(obj: dict[str, Any]) -> tuple[bool, bool]:
    return sealing.placed(KEYS, obj), sealing.vouched(KEYS, obj)


def test_a_sealed_job_verifies_after_a_round_trip_through_json() -> None:
    obj = json.loads(json.dumps(_sealed()))
    assert _both(obj) == (True, True)


def test_defaults_filled_in_by_the_api_server_change_nothing() -> None:
    obj = _sealed()
    obj["spec"]["event"]["labels"] = ["bug"]
    obj["spec"]["event"].setdefault("source", "github")
    obj["spec"]["memoryScope"] = "dependencies"
    obj["metadata"]["annotations"]["unrelated"] = "x"
    obj["metadata"]["labels"]["more"] = "y"
    assert _both(obj) == (True, True)


@pytest.mark.parametrize(
    "field, value",
    [
        ("repository", "other-org/private"),
        ("installationId", 43),
        ("number", 8),
        ("subject", "pull_request"),
        ("headSha", "a" * 40),
        ("sender", "mallory"),
        ("senderAssociation", "OWNER"),
        ("title", "Fix it!"),
        ("source", "manual"),
    ],
)
def test_every_event_field_is_sealed(field: str, value: object) -> None:
    obj = _sealed()
    obj["spec"]["event"][field] = value
    assert _both(obj) == (True, False)


@pytest.mark.parametrize(
    "annotation, value",
    [
        (models.CHAIN_ID, "deadbeef"),
        (models.CHAIN_DEPTH, "3"),
        (models.CHAIN_PATH, '["triage","developer"]'),
        (models.PARENT_JOB, "someone-else"),
    ],
)
def test_every_position_annotation_is_sealed(annotation: str, value: str) -> None:
    obj = _sealed()
    obj["metadata"]["annotations"][annotation] = value
    assert _both(obj) == (False, True)


def test_namespace_and_name_are_sealed_and_the_origin_is_not() -> None:
    obj = _sealed()
    obj["spec"]["origin"] = "chain"
    assert _both(obj) == (True, True)
    for field, value in (("namespace", "team-b"), ("name", "triage-2")):
        obj = _sealed()
        obj["metadata"][field] = value
        assert _both(obj) == (False, False)


def test_a_seal_copied_onto_another_job_does_not_verify() -> None:
    made = _sealed()["metadata"]["annotations"]
    forged = _body(JobEvent(source="github", repository="other-org/private", installation_id=42))
    forged["metadata"]["name"] = "intruder"
    forged["metadata"]["annotations"].update({k: made[k] for k in (models.SEAL, models.EVENT_SEAL)})
    assert _both(forged) == (False, False)


def test_missing_empty_or_foreign_seals_never_verify() -> None:
    obj = _body()
    assert _both(obj) == (False, False)
    obj["metadata"]["annotations"][models.SEAL] = ""
    obj["metadata"]["annotations"][models.EVENT_SEAL] = ""
    assert _both(obj) == (False, False)
    other = sealing.seal_job(OperatorKeys(["someone-elses-key"]), _body())
    assert _both(other) == (False, False)


def test_one_seal_never_verifies_as_the_other() -> None:
    obj = _sealed()
    annotations = obj["metadata"]["annotations"]
    annotations[models.SEAL], annotations[models.EVENT_SEAL] = (
        annotations[models.EVENT_SEAL],
        annotations[models.SEAL],
    )
    assert _both(obj) == (False, False)


def test_an_adopted_root_is_placed_but_its_event_is_not_vouched_for() -> None:
    obj = _body()
    annotations = obj["metadata"]["annotations"]
    annotations[models.SEAL] = sealing.position_seal(KEYS, "team-a", "triage-1", annotations)
    assert _both(obj) == (True, False)


def test_another_purposes_mac_over_the_same_parts_is_no_seal() -> None:
    obj = _body()
    annotations = obj["metadata"]["annotations"]
    token_key = KEYS.subkeys(signing.TOKEN_PURPOSE)[0]
    position = provenance.position_parts("team-a", "triage-1", annotations)
    event = provenance.event_parts("team-a", "triage-1", obj["spec"])
    annotations[models.SEAL] = signing.mac(token_key, *position)
    annotations[models.EVENT_SEAL] = signing.mac(token_key, *event)
    assert _both(obj) == (False, False)


def test_every_configured_key_verifies_and_the_first_seals() -> None:
    rotated = OperatorKeys(["new-key", "operator-key-one"])
    assert sealing.placed(rotated, _sealed()) and sealing.vouched(rotated, _sealed())
    made = sealing.seal_job(OperatorKeys(["operator-key-one", "old"]), _body())
    assert _both(made) == (True, True)


def test_resealing_replaces_a_stale_seal() -> None:
    obj = _sealed()
    obj["spec"]["event"]["number"] = 9
    assert _both(sealing.seal_job(KEYS, obj)) == (True, True)


def test_an_unreadable_event_is_never_covered_by_a_seal() -> None:
    obj = _sealed()
    obj["spec"]["event"] = {"number": "not a number"}
    assert provenance.canonical_event(obj["spec"]["event"]) == provenance.UNREADABLE
    assert _both(obj) == (True, False)


@given(st.dictionaries(st.sampled_from(provenance.POSITION_KEYS), st.text(max_size=8)))
def test_a_position_is_claimed_by_any_position_annotation(annotations: dict[str, str]) -> None:
    assert provenance.claims_position(annotations) == bool(annotations)
    assert not provenance.claims_position({"labrats.work/ticket": "1", "other": "x"})


def test_an_unsealed_event_grants_nothing_and_hands_on_only_its_text() -> None:
    assert provenance.trusted_event(EVENT, sealed=True) is EVENT
    assert provenance.trusted_event(EVENT, sealed=False) is None
    assert provenance.handed_on(EVENT, sealed=True) is EVENT
    handed = provenance.handed_on(EVENT, sealed=False)
    assert handed is not None
    assert (handed.source, handed.installation_id, handed.subject, handed.head_sha) == (
        "manual",
        None,
        None,
        None,
    )
    assert (handed.title, handed.body, handed.repository) == (EVENT.title, EVENT.body, "octo/app")
    assert provenance.handed_on(None, sealed=False) is None


@pytest.mark.parametrize(
    "declared, served, allowed",
    [
        (None, [], True),  # The event's own repository.
        ("octo/app", [], True),
        ("OCTO/App", [], True),
        ("other-org/private", [], False),
        ("other-org/private", ["other-org/private"], True),
        ("other-org/private", ["other-org/*"], True),
        ("octo/other", ["other-org/*"], False),
        ("https://git.example/any.git", [], True),  # Not GitHub: no App token reaches it.
    ],
)
def test_a_workspace_repository_is_the_events_or_one_the_agent_serves(
    declared: str | None, served: list[str], allowed: bool
) -> None:
    found = jobmounts.resolve(
        Workspace(repository=declared), EVENT, "c0ffee", "https://gh.example", served
    )
    assert isinstance(found, jobmounts.ChainWorkspace) == allowed, found
    if not allowed:
        assert isinstance(found, jobmounts.NoWorkspace)
        assert "neither the repository of the event" in found.reason


def test_without_an_event_a_declared_repository_is_resolved_as_before() -> None:
    found = jobmounts.resolve(Workspace(repository="other-org/x"), None, "c0ffee", "https://gh")
    assert isinstance(found, jobmounts.ChainWorkspace)


def test_the_body_is_not_changed_by_verifying() -> None:
    obj = _sealed()
    before = copy.deepcopy(obj)
    _both(obj)
    assert obj == before
