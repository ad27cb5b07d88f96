"""``/agentchain`` comment commands count in ``agentchain_comment_commands_total`` (issue 16),
against the in-process API server.

``commands.handle`` runs for an authenticated ``issue_comment`` delivery (the webhook
calls it with the namespaces' AiAgents).  Aspects covered, one count per command:
- ``applied``: a ``stop`` from an OWNER asks the issue's running job to stop (the stop
  annotations, ``stopped-by: github:<login>``);
- ``refused``: the same command from a commenter the agent's sender policy refuses
  changes nothing;
- ``no_job``: a command on an issue with no job.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY

from agentchain.flow.rules import stoprules
from agentchain.github.rules.matching import AgentCandidate
from agentchain.hop.rules import chains
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import AiAgentSpec
from agentchain.store.signing import OperatorKeys
from agentchain.web.hooks import commands
from tests.unit.fakeapi import OPERATOR_KEY, FakeApi, Obj, sealed
from tests.unit.hop.test_hop_write_order import NS, api, kubeconfig

__all__ = ["api", "kubeconfig"]  # Fixtures.

REPOSITORY = "octo/repo"
KEYS = OperatorKeys([OPERATOR_KEY])
AGENTS = {NS: [AgentCandidate("writer", AiAgentSpec.model_validate({"triggerName": "writer"}))]}


def running_job(api: FakeApi, number: int) -> Obj:
    event = {"source": "github", "repository": REPOSITORY, "number": number}
    return api.put(
        "agentjobs",
        sealed(
            {
                "apiVersion": "labrats.work/v1alpha1",
                "kind": "AgentJob",
                "metadata": {
                    "name": f"job-{number}",
                    "namespace": NS,
                    "labels": chains.issue_labels(JobEvent.model_validate(event)),
                },
                "spec": {"agentRole": "writer", "prompt": "go", "origin": "github", "event": event},
                "status": {"phase": "Running", "reason": "Running"},
            }
        ),
    )


def comment(body: str, number: int, association: str) -> dict[str, Any]:
    return {
        "action": "created",
        "comment": {
            "id": 42,
            "body": body,
            "user": {"login": "octocat"},
            "author_association": association,
        },
        "issue": {"number": number},
        "repository": {"full_name": REPOSITORY},
        "sender": {"login": "octocat", "type": "User"},
    }


async def stop(number: int, association: str) -> Obj | None:
    payload = comment("/agentchain stop", number, association)
    return await commands.handle("issue_comment", payload, AGENTS, KEYS)


def count(verb: str, result: str) -> float:
    labels = {"verb": verb, "result": result}
    return REGISTRY.get_sample_value("agentchain_comment_commands_total", labels) or 0.0


async def test_each_comment_command_counts_once_by_verb_and_result(api: FakeApi) -> None:
    running_job(api, 7)
    before = {r: count("stop", r) for r in ("applied", "refused", "no_job")}

    refused = await stop(7, "NONE")
    assert refused is not None and refused["result"] == "refused"
    assert count("stop", "refused") == before["refused"] + 1
    assert not api.writes, "a refused command must change nothing"

    done = await stop(7, "OWNER")
    assert done is not None and done["result"] == "applied"
    assert count("stop", "applied") == before["applied"] + 1
    annotations = api.objects[("agentjobs", "job-7")]["metadata"]["annotations"]
    assert annotations[stoprules.STOP] == "true"
    assert annotations[stoprules.STOPPED_BY] == "github:octocat"

    nothing = await commands.handle(
        "issue_comment", comment("/agentchain stop", 8, "OWNER"), AGENTS, KEYS
    )
    assert nothing is not None and nothing["result"] == "no_job"
    assert count("stop", "no_job") == before["no_job"] + 1
    assert count("stop", "applied") == before["applied"] + 1
    assert count("stop", "refused") == before["refused"] + 1
