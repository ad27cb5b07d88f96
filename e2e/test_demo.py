"""README's demo command, run as a newcomer runs it (issues 15, 17, 19).

``make demo`` is ``e2e/setup.sh`` (which CI has run already) then ``python -m e2e.demo``;
this runs the latter as its own process, with its own cluster, and reads what it prints.

Aspects covered:
* which agents the demo runs, said first: as root with the real node's tools, real CLIs
  in their reference images, calling the provider whose key is in the environment
  (Anthropic's, OpenAI's, or both), else the stand-in model; when asked, the demo agent
  as a command in the e2e agent image on the real node; with one provider's key every
  step runs that provider's CLI, with no base URL, its own retries and the key from a
  Secret (the real providers are not called here);
* without root, or without the real node's tools, the demo refuses before starting
  anything (exit 2), saying why and what to do;
* the chain of real CLIs in their reference images on the real node, with the stand-in
  model (``realnode``; run in this process, which holds the real node's lock): issue to
  review, the comment on the issue and the dashboard with the four jobs;
* the command path (``AGENTCHAIN_DEMO_AGENTS=command``) on the real node, as its own
  process (``realnode``, in a lane: its node is another process's) and in this process,
  where its pods, shown with ``kubectl get pods``, ran the e2e agent image:
* the signed delivery is accepted and seed 003's three-agent chain completes;
* the comment the chain kept on the issue is printed, one comment, from the GitHub
  stand-in's record, holding the chain's steps;
* the dashboard opens the finished chain (logged in with the admin token it prints),
  and the URL of the chain's page and the token are printed;
* Ctrl-C ends it cleanly (status 0) (its own process).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from e2e import demo, operating, realnodes, runtime_stage
from e2e.models import ModelStandIn
from e2e.runtime_chain import seed_chain

ROOT = Path(__file__).resolve().parents[1]
DEMO_TIMEOUT_SECONDS = 420.0
END = "Press Ctrl-C to stop everything."


def _run_until_ready(out: Path) -> tuple[subprocess.Popen[bytes], str]:
    with out.open("wb") as fh:
        process = subprocess.Popen(
            [sys.executable, "-m", "e2e.demo"],
            cwd=ROOT,
            env={**os.environ, demo.AGENTS_ENV: "command"},
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + DEMO_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        text = out.read_text(errors="replace")
        if END in text:
            return process, text
        if process.poll() is not None:
            raise AssertionError(f"the demo exited {process.returncode}:\n{text[-4000:]}")
        time.sleep(1)
    process.send_signal(signal.SIGINT)
    raise AssertionError(f"the demo printed no end in {DEMO_TIMEOUT_SECONDS}s:\n{text[-4000:]}")


def _assert_the_chain_shown(text: str) -> None:
    """What the command path prints once ready, whichever node it ran on."""
    assert "webhook answered 202" in text, text[-4000:]
    assert "the chain is complete" in text, text[-4000:]
    assert f"$ kubectl get pods -n {demo.NAMESPACE} -o wide" in text, text[-4000:]
    assert "the comment the chain wrote on acme/webapp#1" in text, text[-4000:]
    assert "1 comment(s)" in text, text[-4000:]
    assert "agentchain:chain=demo/" in text, "the printed comment is not the chain's"
    for agent in ("triage", "developer", "reviewer"):
        assert agent in text.split("the comment the chain wrote", 1)[1], agent
    assert "the dashboard shows the finished chain" in text, text[-4000:]
    assert re.search(r"the chain: http://[\d.]+:\d+/ui/chains/demo/\S+", text), text
    assert re.search(r"log in with the admin token \S+", text), text


def _command_plan() -> demo.Plan:
    """The command path's plan on this machine."""
    env = {**os.environ, demo.AGENTS_ENV: "command"}
    return demo.plan(env, os.geteuid(), demo.missing_tools())


def test_without_root_the_demo_refuses_saying_why_and_what_to_do(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("AGENTCHAIN_E2E_KUBECONFIG", raising=False)
    monkeypatch.setenv("AGENTCHAIN_E2E_USE_KUBECONFIG", "0")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert demo.main() == 2
    said = capsys.readouterr().err
    assert "the demo cannot run here: not root" in said, said
    assert "run `make demo` as root, or point AGENTCHAIN_E2E_KUBECONFIG at a cluster" in said


@pytest.mark.realnode
@pytest.mark.timeout(900)
def test_the_demo_runs_a_chain_to_its_comment_and_dashboard(tmp_path: Path) -> None:
    realnodes.skip_on_an_existing_cluster()
    realnodes.skip_outside_a_lane("`python -m e2e.demo`")
    process, text = _run_until_ready(tmp_path / "stdout")
    try:
        assert f"agents: {demo.AGENTS_ENV}=command: " in text, text[-4000:]
        assert "in the e2e agent image's containers on the real node" in text, text[-4000:]
        _assert_the_chain_shown(text)
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C: the demo's normal end.
        try:
            status = process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            raise
    assert status == 0, (tmp_path / "stdout").read_text(errors="replace")[-4000:]


@pytest.mark.realnode
@pytest.mark.timeout(900)
def test_the_demo_command_path_runs_the_agent_image_on_the_real_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    realnodes.skip_on_an_existing_cluster()
    chosen = _command_plan()
    # What main() says first, before it starts this same stage.
    assert not chosen.refused and not chosen.images, chosen.why
    assert chosen.why.endswith("in the e2e agent image's containers on the real node")
    with demo.command_stage() as (info, op, github):
        demo.run_demo(info, op, github)
        pods = operating.get_json(info, "pods", "-n", demo.NAMESPACE)["items"]
    out = capsys.readouterr()
    said = out.err + out.out
    _assert_the_chain_shown(said)
    # Each step ran in a container of the e2e agent image the demo built and imported,
    # and ended 0: the pods kubectl showed are real.
    assert len(pods) == 3, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        [container] = pod["spec"]["containers"]
        assert container["image"] == info.agent_image != "", container["image"]
        [state] = pod["status"]["containerStatuses"]
        assert state["imageID"], state
        assert state["state"]["terminated"]["exitCode"] == 0, state


KEYS = {"ANTHROPIC_API_KEY": "sk-ant-x", "OPENAI_API_KEY": "sk-x"}
COMMAND = {demo.AGENTS_ENV: "command"}


@pytest.mark.parametrize(
    ("env", "euid", "missing", "images", "providers", "said"),
    [
        ({}, 0, [], True, (), "calling the stand-in model server (no ANTHROPIC_API_KEY or"),
        (KEYS, 0, [], True, ("anthropic", "openai"), "calling anthropic and openai"),
        ({"OPENAI_API_KEY": "sk-x"}, 0, [], True, ("openai",), "(OPENAI_API_KEY set)"),
        ({"ANTHROPIC_API_KEY": " "}, 0, [], True, (), "the stand-in model server"),
        (KEYS, 1000, [], False, (), "not root: the real node"),
        (KEYS, 0, ["buildah"], False, (), "the real node needs buildah (e2e/setup.sh"),
        ({demo.AGENTS_ENV: "command"}, 0, [], False, (), "image's containers on the real node"),
        (COMMAND, 1000, [], False, (), "not root: the real node"),
        (COMMAND, 0, ["kubelet"], False, (), "the real node needs kubelet"),
        ({"AGENTCHAIN_E2E_KUBECONFIG": "/k"}, 0, [], False, (), "an existing cluster"),
    ],
    ids=[
        "stand-in",
        "both-keys",
        "openai-key",
        "blank-key",
        "not-root",
        "no-tools",
        "asked",
        "asked-not-root",
        "asked-no-tools",
        "existing-cluster",
    ],
)
def test_the_demo_says_which_agents_and_models_it_runs(
    env: dict[str, str],
    euid: int,
    missing: list[str],
    images: bool,
    providers: tuple[str, ...],
    said: str,
) -> None:
    chosen = demo.plan(env, euid, missing)
    assert (chosen.images, chosen.providers) == (images, providers), chosen
    assert said in chosen.why, chosen.why
    # Without root or the real node's tools the demo refuses (on a named cluster it runs
    # there); what it does then is said in full.
    named = "AGENTCHAIN_E2E_KUBECONFIG" in env
    assert chosen.refused == (not named and (euid != 0 or bool(missing))), chosen
    if chosen.refused and euid != 0:
        assert "run `make demo` as root, or point AGENTCHAIN_E2E_KUBECONFIG" in chosen.why


def test_one_provider_s_key_runs_every_step_on_its_cli_with_the_key_from_a_secret(
    model_standin: ModelStandIn,
) -> None:
    agents = seed_chain(model_standin)
    changed = demo.for_providers(agents, ("openai",))
    assert [a["spec"]["runtime"]["type"] for a in changed] == ["codex"] * 4
    for agent in changed:
        spec = agent["spec"]
        assert spec["defaultModel"] == "gpt-5"
        assert "baseUrl" not in spec["runtime"], spec["runtime"]
        assert spec["runtime"]["credentials"] == {"secretName": "openai", "key": "api-key"}
        names = [e["name"] for e in spec["env"]]
        assert "AGENTCHAIN_MODEL_RETRIES" not in names, names
    both = demo.for_providers(agents, ("anthropic", "openai"))
    assert [(a["spec"]["triggerName"], a["spec"]["runtime"]["type"]) for a in both] == [
        ("ai-triage", "claude-code"), ("ai-developer", "codex"),
        ("ai-reviewer", "claude-code"), ("ai-security", "claude-code"),
    ]  # fmt: skip
    assert "baseUrl" in agents[0]["spec"]["runtime"], "the seed chain itself was changed"
    [secret] = demo.provider_secrets({"OPENAI_API_KEY": " sk-x\n"}, ("openai",))
    assert (secret["metadata"]["name"], secret["stringData"]) == ("openai", {"api-key": "sk-x"})


@pytest.mark.realnode
@pytest.mark.timeout(1500)
def test_the_demo_runs_real_clis_in_their_images_with_the_stand_in_model(
    capsys: pytest.CaptureFixture[str],
) -> None:
    realnodes.skip_on_an_existing_cluster()
    chosen = demo.plan({}, 0, [])
    with runtime_stage.stage(("claude-code", "codex"), github=True) as stage:
        demo.run_in_images(stage, chosen, {})
        jobs = operating.get_json(stage.info, "agentjobs", "-n", runtime_stage.NAMESPACE)["items"]
        stage.standin.assert_clean()
    out = capsys.readouterr()
    said, printed = out.err, out.out  # progress lines on stderr, tables and the comment on stdout
    assert "the chain is complete" in said, said[-4000:]
    phases = {j["spec"]["agentRole"]: j["status"]["phase"] for j in jobs}
    assert phases == dict.fromkeys(
        ("ai-triage", "ai-developer", "ai-reviewer", "ai-security"), "Succeeded"
    ), phases
    assert "the comment the chain wrote on Codertocat/Hello-World#1" in said, said[-4000:]
    assert "1 comment(s)" in said, said[-4000:]
    comment = printed.split("agentchain:chain=agents/", 1)[1]
    for agent in ("triage", "developer", "reviewer"):
        assert agent in comment, (agent, comment[-4000:])
    assert "the dashboard shows the finished chain" in said, said[-4000:]
    assert re.search(r"the chain: http://[\d.]+:\d+/ui/chains/agents/\S+", printed), printed
