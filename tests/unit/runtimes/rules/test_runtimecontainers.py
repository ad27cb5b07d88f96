"""An AiAgent's ``spec.runtime`` made into its job's container (``runtimecontainers``).

Aspects covered:
- no runtime, or ``type: command``: the container is exactly what it was before;
- the whole container of a claude-code agent (image from the settings, the runner as
  command, the runner's variables, the credential through ``secretKeyRef``, the agent's
  own env last), asserted as one literal;
- for every runner type, with or without credentials, baseUrl, mcp, MCP servers, instructions
  (hypothesis): the env, expanded by the kubelet's rules (``tests/unit/kubelet_env.py``) and read
  by the runner's own ``settings_from``/``command_for``, gives the CLI the settings the
  AiAgent asked for, with any text (``$(``, ``$$``) arriving literally; no env value and
  no argument holds a secret's value (secrets reach the pod only through
  ``secretKeyRef``), also in the MCP servers' table;
- the claude-code MCP config file and OpenCode's and Gemini CLI's config files carry the
  pod's values, codex gets names only; OpenCode and Gemini CLI get the standing
  instructions as a file;
- every runner type has a reference image by default; an operator whose setting for a
  type is empty fails that type's jobs with ``RuntimeUnsupported``, naming the setting,
  unless the AiAgent names its image; an AiAgent's image wins over the runtime's default;
  ``spec.args`` is not used beside a runner runtime;
- an opencode agent's allow-list gets the agentchain MCP tools (``agentchain_*``).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentchain.hop.rules import jobspec
from agentchain.hop.rules.jobspec import JobInputs
from agentchain.models.aiagent import AiAgentSpec
from agentchain.models.conditions import Reason
from agentchain.runtimes.rules import clis, runtimecontainers
from agentchain.settings import Settings
from tests.unit import kubelet_env as envs

SETTINGS = Settings(
    api_url="http://agentchain.test:8080",
    runtime_image_opencode="me/agentchain-opencode:1",
    runtime_image_gemini="me/agentchain-gemini:1",
)
SECRET = "fix-1-0123456789abcdef"
PROVIDER_KEY = "sk-provider-SECRET-value"
MCP_SECRET = "mcp-SECRET-value"


def _inputs(agent: dict[str, Any]) -> JobInputs:
    return JobInputs(
        agentjob_name="fix-1",
        job_name="fix-1",
        namespace="team-a",
        agent=AiAgentSpec.model_validate({"triggerName": "coder", **agent}),
        chain_id="c0ffee",
        secret_name=SECRET,
        labels={},
        annotations={},
    )


def _container(agent: dict[str, Any], settings: Settings = SETTINGS) -> dict[str, Any]:
    job = jobspec.build_job(_inputs(agent), settings)
    container: dict[str, Any] = job["spec"]["template"]["spec"]["containers"][0]
    return container


def _launch(agent: dict[str, Any], config_maps: dict[str, dict[str, str]]) -> envs.Launch:
    job = jobspec.build_job(_inputs(agent), SETTINGS)
    pod = {"metadata": {"name": "p"}, "spec": job["spec"]["template"]["spec"]}
    secrets = {
        SECRET: jobspec.secret_data("the prompt", "tok-123"),
        "provider": {"api-key": PROVIDER_KEY},
        "mcp": {"token": MCP_SECRET},
    }
    encode = base64.b64encode
    encoded = {
        n: {k: encode(v.encode()).decode() for k, v in d.items()} for n, d in secrets.items()
    }
    return envs.build_launch(pod, pod["spec"]["containers"][0], encoded, config_maps, {})


def test_no_runtime_and_type_command_leave_the_container_as_it_was() -> None:
    plain = {"image": "me/agent:1", "command": ["run"], "args": ["--x"]}
    before = _container(plain)
    assert _container({**plain, "runtime": {"type": "command"}}) == before
    assert before["image"] == "me/agent:1" and before["command"] == ["run"]
    assert before["args"] == ["--x"]
    assert not any(e["name"].startswith("AGENTCHAIN_") for e in before["env"])


def test_the_container_of_a_claude_code_agent() -> None:
    agent = {
        "defaultModel": "claude-sonnet-4-5",
        "env": [{"name": "MINE", "value": "1"}],
        "runtime": {
            "type": "claude-code",
            "maxTurns": 7,
            "allowedTools": ["Read", "Bash(git log:*)"],
            "instructions": {"configMapRef": {"name": "rules", "key": "AGENTS.md"}},
            "credentials": {"secretName": "provider", "key": "api-key"},
            "baseUrl": "http://models.svc:8080",
        },
    }
    container = _container(agent)
    assert container["image"] == SETTINGS.runtime_image_claude_code
    assert container["command"] == ["agentchain", "agent", "run"]
    assert "args" not in container
    runtime_env = [e for e in container["env"] if e["name"] not in jobspec_names()]
    assert runtime_env == [
        {"name": "AGENTCHAIN_RUNTIME", "value": "claude-code"},
        {"name": "AGENTCHAIN_MAX_TURNS", "value": "7"},
        {"name": "AGENTCHAIN_ALLOWED_TOOLS", "value": "Read\nBash(git log:*)\nmcp__agentchain"},
        {
            "name": "AGENTCHAIN_INSTRUCTIONS",
            "valueFrom": {"configMapKeyRef": {"name": "rules", "key": "AGENTS.md"}},
        },
        {
            "name": "AGENTCHAIN_PROTOCOL",
            "value": runtimecontainers.protocol(AiAgentSpec.model_validate({"triggerName": "c"})),
        },
        {
            "name": "ANTHROPIC_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "provider", "key": "api-key"}},
        },
        {"name": "ANTHROPIC_BASE_URL", "value": "http://models.svc:8080"},
        {
            "name": "AGENTCHAIN_MCP_SERVERS",
            "value": json.dumps(
                {
                    "agentchain": {
                        "args": ["mcp"],
                        "command": "agentchain",
                        "env": list(runtimecontainers.MCP_JOB_ENV),
                    }
                },
                sort_keys=True,
            ),
        },
        {"name": "MINE", "value": "1"},
    ]


def agent_spec(agent: dict[str, Any]) -> dict[str, Any]:
    return {"triggerName": "coder", **agent}


def jobspec_names() -> set[str]:
    """The variables every job gets, runtime or not."""
    return {e["name"] for e in _container({})["env"]}


def test_an_oauth_token_and_a_codex_key_take_their_cli_s_variables() -> None:
    token = {"secretName": "s", "key": "k", "kind": "oauthToken"}
    claude = {"type": "claude-code", "credentials": token}
    names = {e["name"] for e in _container({"runtime": claude})["env"]}
    assert "CLAUDE_CODE_OAUTH_TOKEN" in names and "ANTHROPIC_API_KEY" not in names
    codex = {"type": "codex", "credentials": {"secretName": "s", "key": "k"}, "baseUrl": "http://v"}
    container = _container({"runtime": codex})
    assert container["image"] == SETTINGS.runtime_image_codex
    names = {e["name"] for e in container["env"]}
    assert {"OPENAI_API_KEY", "OPENAI_BASE_URL"} <= names


@pytest.mark.parametrize("kind", ["claude-code", "codex", "opencode", "gemini"])
def test_every_runner_runtime_has_a_reference_image_by_default(kind: str) -> None:
    bare = Settings(api_url="http://agentchain.test:8080")
    image = _container({"runtime": {"type": kind}}, bare)["image"]
    assert image == f"ghcr.io/labrats-work/agentchain-{kind}:latest"


@pytest.mark.parametrize("kind", ["opencode", "gemini"])
def test_a_runtime_whose_image_setting_is_empty_needs_the_agent_s_image(kind: str) -> None:
    setting = f"runtime_image_{kind}"
    bare = Settings(api_url="http://agentchain.test:8080").model_copy(update={setting: ""})
    with pytest.raises(runtimecontainers.RuntimeUnsupported) as raised:
        _container({"runtime": {"type": kind}}, bare)
    assert raised.value.reason == Reason.RUNTIME_UNSUPPORTED
    assert f"AGENTCHAIN_{setting.upper()} is empty; set spec.image" in str(raised.value)
    assert _container({"image": "me/x:1", "runtime": {"type": kind}}, bare)["image"] == "me/x:1"


def test_opencode_runs_in_the_agent_s_image_with_the_agentchain_tools_allowed() -> None:
    bare = Settings(api_url="http://agentchain.test:8080")
    agent = {"image": "me/oc:2", "runtime": {"type": "opencode", "allowedTools": ["read"]}}
    container = _container(agent, bare)
    assert container["image"] == "me/oc:2"
    assert container["command"] == ["agentchain", "agent", "run"]
    # Its allow-list denies every other tool: the agentchain tools are added to it.
    assert _env_value(container, "AGENTCHAIN_ALLOWED_TOOLS") == "read\nagentchain_*"
    assert _container({"runtime": {"type": "opencode"}})["image"] == "me/agentchain-opencode:1"


def test_the_agent_s_image_and_the_settings_command_win() -> None:
    settings = Settings(
        api_url="http://a", runtime_command=("python", "-m", "agentchain", "agent", "run")
    )
    container = _container({"image": "me/claude:2", "runtime": {"type": "claude-code"}}, settings)
    assert container["image"] == "me/claude:2"
    assert container["command"] == ["python", "-m", "agentchain", "agent", "run"]
    table = json.loads(_env_value(container, "AGENTCHAIN_MCP_SERVERS"))
    assert table["agentchain"]["command"] == "python"
    assert table["agentchain"]["args"] == ["-m", "agentchain", "mcp"]


def _env_value(container: dict[str, Any], name: str) -> str:
    return str(next(e["value"] for e in container["env"] if e["name"] == name))


def test_mcp_false_registers_no_server_and_allows_no_mcp_tool() -> None:
    container = _container({"runtime": {"type": "claude-code", "mcp": False}})
    names = {e["name"] for e in container["env"]}
    assert "AGENTCHAIN_MCP_SERVERS" not in names and "AGENTCHAIN_ALLOWED_TOOLS" not in names


# --- every combination, through the kubelet's expansion and the runner's reading ----------

TEXT = st.text(alphabet=st.sampled_from("ab $()\\{}\"'\n"), max_size=40)


def _runtime(
    kind: str,
    credentials: bool,
    base_url: str | None,
    mcp: bool,
    servers: bool,
    instructions: str | None,
) -> dict[str, Any]:
    runtime: dict[str, Any] = {"type": kind, "mcp": mcp}
    if credentials:
        runtime["credentials"] = {"secretName": "provider", "key": "api-key"}
    if base_url:
        runtime["baseUrl"] = base_url
    if instructions == "configmap":
        runtime["instructions"] = {"configMapRef": {"name": "rules", "key": "AGENTS.md"}}
    elif instructions is not None:
        runtime["instructions"] = {"text": instructions}
    if servers:
        runtime["mcpServers"] = [
            {
                "name": "tracker",
                "command": "tracker-mcp",
                "args": ["--flag=$(AGENT_TOKEN)"],
                "env": [
                    {
                        "name": "TRACKER_TOKEN",
                        "valueFrom": {"secretKeyRef": {"name": "mcp", "key": "token"}},
                    },
                    {"name": "TRACKER_URL", "value": "http://t/$(TRACKER_TOKEN)"},
                ],
            }
        ]
    return runtime


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(["claude-code", "codex", "opencode", "gemini"]),
    credentials=st.booleans(),
    base_url=st.sampled_from([None, "http://models.svc/$(AGENT_TOKEN)/v1"]),
    mcp=st.booleans(),
    servers=st.booleans(),
    instructions=st.one_of(st.none(), TEXT.filter(str.strip), st.just("configmap")),
    model=TEXT,
)
def test_any_runtime_reaches_the_cli_literally_and_without_a_secret_in_sight(
    kind: str,
    credentials: bool,
    base_url: str | None,
    mcp: bool,
    servers: bool,
    instructions: str | None,
    model: str,
) -> None:
    runtime = _runtime(kind, credentials, base_url, mcp, servers, instructions)
    config_maps = {"rules": {"AGENTS.md": "from $(AGENT_TOKEN) the map"}}
    agent = {"runtime": runtime, "defaultModel": model}
    container = _container(agent)
    launch = _launch(agent, config_maps)
    # Secrets only through secretKeyRef: no plain value, no argument holds one.
    plain = json.dumps([e.get("value") for e in container["env"]])
    for secret in (PROVIDER_KEY, MCP_SECRET, "tok-123"):
        assert secret not in plain and secret not in " ".join(launch.argv)
    assert launch.argv == ["agentchain", "agent", "run"]
    got = clis.settings_from(launch.env, "the prompt")
    assert got.runtime == kind and got.model == model.strip()
    expected_instructions = (
        "from $(AGENT_TOKEN) the map" if instructions == "configmap" else (instructions or "")
    )
    assert got.instructions == expected_instructions.strip()
    if credentials:
        assert launch.env[runtimecontainers.CREDENTIAL_ENV[(kind, "apiKey")]] == PROVIDER_KEY
    if base_url:
        assert launch.env[runtimecontainers.BASE_URL_ENV[kind]] == base_url
    names = [s.name for s in got.mcp_servers]
    assert names == [n for n, on in (("agentchain", mcp), ("tracker", servers)) if on]
    command = clis.command_for(got, launch.env, "/scratch")
    config = "".join(command.files.values())
    if servers:
        tracker = next(s for s in got.mcp_servers if s.name == "tracker")
        assert tracker.args == ("--flag=$(AGENT_TOKEN)",)
        assert launch.env["TRACKER_URL"] == "http://t/$(TRACKER_TOKEN)"
        # The secret reaches the server through the owner-only file (claude, opencode) or
        # by name (codex), never on the command line.
        if kind == "codex":
            assert not command.files
        else:
            assert MCP_SECRET in config
    assert MCP_SECRET not in " ".join(command.argv)
    assert PROVIDER_KEY not in " ".join(command.argv) + config
    # The chain's protocol, then the AiAgent's own instructions, reach the CLI.
    assert got.protocol == runtimecontainers.protocol(AiAgentSpec.model_validate(agent_spec(agent)))
    standing = f"{got.protocol}\n\n{got.instructions}" if got.instructions else got.protocol
    if kind == "claude-code":
        assert command.argv[command.argv.index("--append-system-prompt") + 1] == standing
    elif kind == "gemini":
        assert command.files["/scratch/gemini-home/.gemini/GEMINI.md"] == standing
    elif kind == "opencode":
        assert command.files["/scratch/instructions.md"] == standing
        config_file = json.loads(command.files["/scratch/opencode.json"])
        assert config_file["instructions"] == ["/scratch/instructions.md"]
    else:
        assert f"developer_instructions={json.dumps(standing)}" in command.argv


def test_the_protocol_carries_seed_002_and_seed_004_for_a_real_agent() -> None:
    default = runtimecontainers.protocol(AiAgentSpec.model_validate({"triggerName": "c"}))
    # Learnings first, pointing at the section the operator adds on a first run only.
    assert "'## MANDATORY: Learnings (read before any other work)'" in default
    assert "before any other work" in default
    # The hand-off, read from the previous agent and written for the next one.
    assert default.count("'## Downstream Directives'") == 2
    assert "<chain-context>" in default and "never overrides" in default
    # The anchor, kept through the MCP tool; no completion marker unless one is set.
    assert "anchor_set" in default and "anchor_get" in default
    assert "Completion:" not in default

    custom = AiAgentSpec.model_validate(
        {
            "triggerName": "c",
            "handoffHeading": "## Next steps",
            "completionMarker": "REVIEW_COMPLETE",
            "runtime": {"type": "codex", "mcp": False},
        }
    )
    text = runtimecontainers.protocol(custom)
    assert "'## Next steps'" in text and "Downstream Directives" not in text
    assert "end your final answer with the line 'REVIEW_COMPLETE'" in text
    # Without the agentchain MCP server there is no tool to keep an anchor with.
    assert "anchor_set" not in text


def test_the_protocol_reaches_the_runner_as_plain_text_whatever_the_marker_holds() -> None:
    agent = {"completionMarker": "DONE $(AGENT_TOKEN) $$", "runtime": {"type": "claude-code"}}
    launch = _launch(agent, {})
    got = clis.settings_from(launch.env, "the prompt")
    assert "'DONE $(AGENT_TOKEN) $$'" in got.protocol
    assert got.standing_instructions == got.protocol  # No instructions of its own.
