"""The reference agent images (``images/agent/Dockerfile``, one per runtime), built from
the repository with no registry (``e2e/controlplane/agent_images.py``), run AgentJobs on
the real node: the operator builds each pod from the AiAgent's ``spec.runtime`` with no
command of the test's, the pinned CLI in the image calls the stand-in model server over
the node's bridge, and the runner in the image hands the answer and the usage to the
job API with the job's token (``e2e/runtime_stage.py`` sets it up).

Marked ``realnode`` like ``test_operator_image.py``: it needs root, buildah, mmdebstrap
and the real node, so ``make test`` deselects it and ``make realnode`` runs it. The
operator is a host process (as in every other e2e test) listening on the bridge address;
what this test is about is the agent container.

Aspects covered:
- claude-code: the job Succeeds with the model's scripted answer as its result, and
  tokens, cost and turns in ``status.usage``; the model's scripted call of an
  ``agentchain mcp`` tool is answered by the server the image carries (the store entry
  is then read back through the job API);
- codex: the job Succeeds with the scripted answer, and tokens and turns (codex reports
  no cost);
- opencode and gemini (Gemini CLI on the Node its image carries): each model's scripted
  store write, under the name its CLI gives the tool, goes through the image's
  ``agentchain mcp`` (the entry is read back through the job API), and the job Succeeds
  with the answer and its tokens and turns;
- each pod ran the image the operator was told to use, and its container exited 0;
- a failing provider and a turn limit, for every runtime (each case's four jobs side by
  side, each AiAgent with an API key of its own, which the stand-in scripts apart): a key
  the provider refuses (401) ends the job ``ModelAuthFailed`` after one request; a 429
  storm (still 429 after the one retry allowed, OpenCode's own five) ``ModelRateLimited``;
  a provider 500 (OpenCode again after its five retries) ``ModelUnavailable``; a turn
  limit of 1 with a tool call to make ``TurnLimitReached`` (codex exec has no turn limit:
  the runner says so and runs without one). Each is the exit code of the image's runner,
  the job's ``Failed`` reason with the runner's one-line message, the REASON column of
  ``kubectl get aj -o wide`` and a Warning Event's reason. (The chain's GitHub comment
  renders the same status; it is checked on host processes for Claude Code in
  ``e2e/test_runtime_chain.py``, the comment being the operator's, not the image's);
- a budget stops a chain from the reported cost alone: Claude Code's reported cost (its
  own price of the tokens) takes the chain over ``maxCost`` and the next step never
  starts. Claude Code only: codex and Gemini CLI report no cost, OpenCode none for a
  model it has no price for, and the budget's use of a reported cost is the operator's
  (``e2e/test_runtime_chain.py``, ``e2e/test_budgets.py``);
- the images carry no trace of the build's host: the CA bundle mounted for the CLI's
  download (this machine's, with its TLS-intercepting CA) is in no layer, nor is the
  build's pip configuration, and the image's user is the numeric non-root 10001.
"""

from __future__ import annotations

import json
import os
import tarfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from e2e import chaining, operating, runtime_stage
from e2e.controlplane.cluster import existing_kubeconfig
from e2e.models import failure, text, tool
from e2e.models.script import Answer

pytestmark = pytest.mark.realnode

Obj = dict[str, Any]


def _store_entry(stage: runtime_stage.Stage, namespace: str, key: str) -> Obj:
    request = urllib.request.Request(
        # An admin names the tenant: the Kubernetes namespace whose store it is.
        f"{stage.operator.url}/api/store/{namespace}/{key}?tenant={runtime_stage.NAMESPACE}",
        headers={"Authorization": f"Bearer {stage.operator.admin_token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        entry: Obj = json.load(response)
    return entry


def _image_files(archive: Path) -> tuple[Obj, dict[str, bytes]]:
    """The image's config, and the CA bundles and pip configurations its layers hold
    (by layer and path: a later layer's copy would replace the base image's)."""
    found: dict[str, bytes] = {}
    with tarfile.open(archive) as oci:

        def blob(digest: str) -> Any:
            return oci.extractfile(f"blobs/sha256/{digest.split(':')[1]}")

        [entry] = json.load(oci.extractfile("index.json"))["manifests"]  # type: ignore[arg-type]
        manifest = json.load(blob(entry["digest"]))
        config: Obj = json.load(blob(manifest["config"]["digest"]))
        for number, layer in enumerate(manifest["layers"]):
            with tarfile.open(fileobj=blob(layer["digest"]), mode="r|*") as files:
                for member in files:
                    name = member.name
                    base = name.rsplit("/", 1)[-1]
                    wanted = base == "ca-certificates.crt" or base in ("pip.conf", "pip.ini")
                    if member.isfile() and wanted:
                        data = files.extractfile(member)
                        found[f"{number}:{name}"] = data.read() if data else b""
    return config, found


def _no_trace_of_the_build_host(archive: Path) -> None:
    config, files = _image_files(archive)
    assert config["config"]["User"] == "10001:10001", config["config"]
    host_bundle = Path(os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt")
    host = host_bundle.read_bytes()
    # The base image's own bundle, in its first layer, and nothing of the host's.
    assert [path for path in files if path.endswith("ca-certificates.crt")] == [
        "0:etc/ssl/certs/ca-certificates.crt"
    ], sorted(files)
    assert host not in files.values()
    assert not [path for path in files if path.endswith(".conf")], sorted(files)


def _ran_in(stage: runtime_stage.Stage, job: str, runtime: str) -> None:
    [pod] = stage.pods(job)
    [container] = pod["spec"]["containers"]
    assert container["image"] == stage.images[runtime].ref, container
    [state] = pod["status"]["containerStatuses"]
    assert state["state"]["terminated"]["exitCode"] == 0, state


# runtime -> the name its CLI gives agentchain mcp's store_set tool
STORE_SET = {"opencode": "agentchain_store_set", "gemini": "mcp_agentchain_store_set"}


def test_every_runtime_s_job_runs_in_its_reference_image_on_the_real_node() -> None:
    if existing_kubeconfig() is not None:
        pytest.skip("the real node is part of the local cluster only")
    with runtime_stage.stage() as stage:
        for image in stage.images.values():
            _no_trace_of_the_build_host(image.archive)
        for runtime in stage.images:
            stage.agent(runtime, runtime)

        entry = {"namespace": "notes", "key": "plan", "value": "from the image", "ttl_seconds": 600}
        stage.standin.script(
            tool("mcp__agentchain__store_set", entry),
            text("Six times seven is 42.", input_tokens=1000, output_tokens=200),
        )
        stage.start_job("ask-claude", "claude-code")
        status = stage.ended("ask-claude")
        assert status["phase"] == "Succeeded", (status, stage.logs("ask-claude"))
        assert status["result"].strip() == "Six times seven is 42.", status
        # The tool turn's 100 + 20 tokens (the stand-in's default) and the answer's 1,200;
        # Claude Code prices claude-sonnet-4-5 at $3 / $15 per million input / output tokens.
        usage = {"tokens": 1320, "cost": pytest.approx(0.0066), "turns": 2}
        usage |= {"inputTokens": 1100, "outputTokens": 220}
        assert status["usage"] == usage, status
        # The store entry the model asked for, written by `agentchain mcp` in the image.
        assert _store_entry(stage, "notes", "plan")["value"] == "from the image"
        _ran_in(stage, "ask-claude", "claude-code")

        stage.standin.script(text("Forty-two.", input_tokens=300, output_tokens=40))
        stage.start_job("ask-codex", "codex")
        status = stage.ended("ask-codex")
        assert status["phase"] == "Succeeded", (status, stage.logs("ask-codex"))
        assert status["result"].strip() == "Forty-two.", status
        split = {"inputTokens": 300, "outputTokens": 40}
        assert status["usage"] == {"tokens": 340, "cost": 0.0, "turns": 1, **split}, status
        [request] = stage.standin.exchanges("responses")
        assert request.body["model"] == "gpt-5"
        _ran_in(stage, "ask-codex", "codex")

        for runtime, name in STORE_SET.items():
            value = f"from the {runtime} image"
            entry = {"namespace": runtime, "key": "plan", "value": value, "ttl_seconds": 600}
            stage.standin.script(tool(name, entry), text("Stored the plan."))
            stage.start_job(f"ask-{runtime}", runtime)
            status = stage.ended(f"ask-{runtime}")
            assert status["phase"] == "Succeeded", (status, stage.logs(f"ask-{runtime}"))
            assert status["result"].strip() == "Stored the plan.", status
            # Two turns of the stand-in's default 100 + 20 tokens; neither CLI has a price.
            split = {"inputTokens": 200, "outputTokens": 40}
            assert status["usage"] == {"tokens": 240, "cost": 0.0, "turns": 2, **split}, status
            assert _store_entry(stage, runtime, "plan")["value"] == value
            _ran_in(stage, f"ask-{runtime}", runtime)

        _failures_end_with_their_own_reasons(stage)
        _a_budget_stops_the_chain_from_the_reported_cost(stage)
        stage.standin.assert_clean()


@dataclass(frozen=True)
class Failing:
    """One way a runtime's job must fail: its AiAgent, what the model answers and what
    the job must end with."""

    runtime: str
    case: str  # "refused", "storm", "down", "turns"
    reason: str
    summary: str  # the start of the runner's one-line message
    requests: int  # the model requests the CLI makes before giving up
    answers: tuple[Answer, ...] = ()
    standing: Answer | None = None
    retries: int = 0  # AGENTCHAIN_MODEL_RETRIES
    runtime_fields: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.case}-{self.runtime}"

    @property
    def key(self) -> str:
        """Its own API key: the stand-in answers it from its own script; a refused
        case's key is one the stand-in does not know."""
        return f"sk-{self.name}"


REFUSED = ("ModelAuthFailed", "the model provider refused the credentials: ")
STORM = ("ModelRateLimited", "the model provider kept rate-limiting the agent: ")
DOWN = ("ModelUnavailable", "the model provider failed or could not be reached: ")
TURNS = ("TurnLimitReached", "the agent reached its turn limit: ")
# Each CLI's tool call to make when a turn limit of 1 leaves it no turn to answer, and
# what its allowed tools must say for it to run it.
TURN_TOOLS: dict[str, tuple[Answer, list[str]]] = {
    "claude-code": (tool("Bash", {"command": "echo checking", "description": "Check"}),
                    ["Bash(echo:*)"]),
    "opencode": (tool("bash", {"command": "echo checking", "description": "Check"}), []),
    "gemini": (tool("run_shell_command", {"command": "echo checking"}),
               ["run_shell_command(echo)"]),
}  # fmt: skip
# The requests of a 429 storm and of a 500, with one retry allowed and none: OpenCode
# retries five times whatever the runner asks (the provider's retry-after is 0 here).
STORM_REQUESTS = {"claude-code": 2, "codex": 2, "opencode": 6, "gemini": 2}
DOWN_REQUESTS = {"claude-code": 1, "codex": 1, "opencode": 6, "gemini": 1}
# OpenCode's last step, once out of steps, is a summary with no tools: 2 requests.
TURN_REQUESTS = {"claude-code": 1, "opencode": 2, "gemini": 1}


def _failing_cases(runtimes: list[str]) -> list[Failing]:
    cases = []
    for runtime in runtimes:
        cases += [
            Failing(runtime, "refused", *REFUSED, requests=1),
            Failing(runtime, "storm", *STORM, STORM_REQUESTS[runtime],
                    standing=failure(429, retry_after=0), retries=1),
            Failing(runtime, "down", *DOWN, DOWN_REQUESTS[runtime], standing=failure(500)),
        ]  # fmt: skip
        if runtime in TURN_TOOLS:
            call, allowed = TURN_TOOLS[runtime]
            fields: Obj = {"maxTurns": 1, **({"allowedTools": allowed} if allowed else {})}
            cases.append(
                Failing(runtime, "turns", *TURNS, TURN_REQUESTS[runtime],
                        answers=(call, text("Out of turns: the check ran, nothing else did.")),
                        runtime_fields=fields)
            )  # fmt: skip
    return cases


def _with_retries(stage: runtime_stage.Stage, agent: Obj, retries: int) -> None:
    """``agent`` again, allowed ``retries`` retries of a failed model request."""
    for variable in agent["spec"]["env"]:
        if variable["name"] == "AGENTCHAIN_MODEL_RETRIES":
            variable["value"] = str(retries)
    chaining.apply(stage.info, runtime_stage.NAMESPACE, agent)


def _failures_end_with_their_own_reasons(stage: runtime_stage.Stage) -> None:
    """Every runtime's failing provider and turn limit: each case's jobs (one a runtime)
    at once, a case after the other (all at once, on 2 cores, starve the pods)."""
    cases = _failing_cases(list(stage.images))
    for case in cases:
        if case.case != "refused":
            stage.standin.script(*case.answers, key=case.key)
            stage.standin.always(case.standing, key=case.key)
        # No MCP server: these runs are about the provider, and each server is one more
        # process to start in the pod.
        fields = {"mcp": False, **case.runtime_fields}
        agent = stage.agent(case.name, case.runtime, key=case.key, **fields)
        if case.retries:
            _with_retries(stage, agent, case.retries)
    for kind in ("refused", "storm", "down", "turns"):
        wave = [case for case in cases if case.case == kind]
        for case in wave:
            stage.start_job(case.name, case.name)
        for case in wave:
            _ended_with_its_reason(stage, case)


def _ended_with_its_reason(stage: runtime_stage.Stage, case: Failing) -> None:
    namespace = runtime_stage.NAMESPACE
    status = stage.ended(case.name, timeout=300)
    assert (status["phase"], status.get("reason")) == ("Failed", case.reason), (
        case.name, status, stage.logs(case.name),
    )  # fmt: skip
    assert status["message"].startswith(case.summary), (case.name, status["message"])
    wide = stage.info.kubectl("get", "aj", case.name, "-n", namespace, "-o", "wide").stdout
    header, row = wide.splitlines()
    assert header.split()[-1] == "REASON" and row.split()[-1] == case.reason, wide
    assert chaining.has_event(stage.info, namespace, case.name, "Warning", case.reason)
    asked = [e.status for e in stage.standin.exchanges(key=case.key)]
    failed = {"refused": 401, "storm": 429, "down": 500}.get(case.case, 200)
    assert asked == [failed] * case.requests, (case.name, asked)


def _a_budget_stops_the_chain_from_the_reported_cost(stage: runtime_stage.Stage) -> None:
    namespace = runtime_stage.NAMESPACE
    # 10,000 input tokens of claude-sonnet-4-5 are 0.03 USD by Claude Code's own price:
    # over 0.02. The token budget is far away, so only the cost can stop the chain.
    stage.standin.script(text("Triage done.", input_tokens=10_000, output_tokens=10),
                         key="sk-budget")  # fmt: skip
    stage.standin.script(text("never asked for"), key="sk-budget-next")
    stage.agent("budget-next", "claude-code", key="sk-budget-next")
    spender = stage.agent("budget", "claude-code", key="sk-budget")
    spender["spec"]["budget"] = {"maxCost": 0.02, "maxTokens": 10_000_000}
    spender["spec"]["eventTriggers"] = [
        {"source": "manual", "next": {"agentTriggerName": "budget-next", "condition": "always"}}
    ]
    chaining.apply(stage.info, namespace, spender)
    stage.start_job("over-budget", "budget")

    def chain_ended() -> bool:
        return bool(stage.status("over-budget").get("chainComplete"))

    operating.wait_until(chain_ended, timeout=240, what="the budgeted chain to end")
    status = stage.status("over-budget")
    assert status["reason"] == "BudgetExceeded", (status, stage.logs("over-budget"))
    assert status["usage"]["cost"] == pytest.approx(0.03015), status
    jobs = operating.get_json(stage.info, "agentjobs", "-n", namespace)["items"]
    roles = [job["spec"]["agentRole"] for job in jobs]
    assert "budget-next" not in roles, roles
    assert [e.status for e in stage.standin.exchanges(key="sk-budget")] == [200]
    assert stage.standin.exchanges(key="sk-budget-next") == []
