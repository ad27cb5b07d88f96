"""The agent CLIs the runner drives, as pure functions: no I/O.

For each runtime (``claude-code``: Claude Code's ``claude``; ``codex``: ``codex exec``;
``opencode``: ``opencode run``; ``gemini``: Gemini CLI's ``gemini -p``):
the command line built from the runner's settings (``command_for``), the reading of the
CLI's JSON event stream (``Transcript.feed``), a one-line rendering of each event for
the pod log (``log_line``) and the end of the run (``outcome``): the final answer, the
usage to report, or the provider error and the exit code of ``runnerexits`` it maps to.

Every CLI is run non-interactively with the prompt on stdin (a prompt may be larger
than one argument may be), printing one JSON event a line on stdout.

OpenCode takes what the others take as flags in a config file of its own (``OPENCODE_CONFIG``,
written by the runner): a model provider at ``OPENAI_BASE_URL`` (an OpenAI-compatible Chat
Completions server), the turn limit as its build agent's ``steps``, the allowed tools as
permissions, the MCP servers, and the standing instructions as an instructions file.
Gemini CLI likewise reads a ``settings.json`` and a ``GEMINI.md`` the runner writes in a
home of its own (``GEMINI_CLI_HOME``), which moves none of the agent's other files.

When the pod traces, Claude Code and codex also export their own spans under the job's
(``clitelemetry``); OpenCode and Gemini CLI are run as they were.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentchain.core.rules import runnerexits as exits
from agentchain.runtimes.rules import clitelemetry

CLAUDE_CODE = "claude-code"
CODEX = "codex"
OPENCODE = "opencode"
GEMINI = "gemini"
RUNTIMES = (CLAUDE_CODE, CODEX, OPENCODE, GEMINI)
DEFAULT_CLIS = {CLAUDE_CODE: "claude", CODEX: "codex", OPENCODE: "opencode", GEMINI: "gemini"}
EFFORTS = ("low", "medium", "high")
MESSAGE_MAX_CHARS = 300
LOG_LINE_MAX_CHARS = 2000

RUNTIME_ENV = "AGENTCHAIN_RUNTIME"
CLI_ENV = "AGENTCHAIN_AGENT_CLI"
MAX_TURNS_ENV = "AGENTCHAIN_MAX_TURNS"
ALLOWED_TOOLS_ENV = "AGENTCHAIN_ALLOWED_TOOLS"
MODEL_RETRIES_ENV = "AGENTCHAIN_MODEL_RETRIES"
CODEX_BASE_URL_ENV = "OPENAI_BASE_URL"
CODEX_SANDBOX_ENV = "AGENTCHAIN_CODEX_SANDBOX"
CODEX_SANDBOXES = ("read-only", "workspace-write", "danger-full-access")
CODEX_PROVIDER = "agentchain"
INSTRUCTIONS_ENV = "AGENTCHAIN_INSTRUCTIONS"
MCP_SERVERS_ENV = "AGENTCHAIN_MCP_SERVERS"
PROTOCOL_ENV = "AGENTCHAIN_PROTOCOL"
MCP_CONFIG_FILE = "mcp.json"
SETTINGS_FILE = "claude-settings.json"
OPENCODE_CONFIG_FILE = "opencode.json"
OPENCODE_INSTRUCTIONS_FILE = "instructions.md"
OPENCODE_PROVIDER = "agentchain"
GEMINI_HOME = "gemini-home"
AGENTCHAIN_SERVER = "agentchain"  # agentchain mcp's name among the MCP servers
GEMINI_MAX_ATTEMPTS = 10  # Gemini CLI's own cap on tries of a model request
CODEX_MCP_STARTUP_SECONDS = 120  # how long codex waits for an MCP server to start


class SettingsError(ValueError):
    """The runner's environment does not make a run (exit ``EXIT_RUNNER_MISCONFIGURED``)."""


@dataclass(frozen=True)
class Settings:
    """What the runner was asked to run, from the pod's environment (see ``settings_from``)."""

    runtime: str
    cli: str
    prompt: str
    model: str = ""
    effort: str = ""
    max_turns: int | None = None
    allowed_tools: tuple[str, ...] = ()
    model_retries: int | None = None
    base_url: str = ""  # codex, opencode: an OpenAI-compatible server (OPENAI_BASE_URL)
    codex_sandbox: str = ""  # codex: its own sandbox mode; empty: the pod is the sandbox
    instructions: str = ""  # standing instructions besides the prompt
    mcp_servers: tuple[McpServer, ...] = ()
    protocol: str = ""  # the chain's protocol (the operator's), before the instructions

    @property
    def standing_instructions(self) -> str:
        """What the CLI gets besides the prompt: the chain's protocol, then the AiAgent's
        own instructions, which may refine it."""
        return "\n\n".join(part for part in (self.protocol, self.instructions) if part)


@dataclass(frozen=True)
class McpServer:
    """A stdio MCP server for the CLI: its variables are named, their values are the
    pod's (``AGENTCHAIN_MCP_SERVERS`` never holds a value)."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()


def _mcp_servers(raw: str) -> tuple[McpServer, ...]:
    if not raw.strip():
        return ()
    try:
        table = json.loads(raw)
        servers = tuple(
            McpServer(
                str(name),
                str(spec["command"]),
                tuple(str(a) for a in spec.get("args", [])),
                tuple(str(e) for e in spec.get("env", [])),
            )
            for name, spec in table.items()
        )
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise SettingsError(f"{MCP_SERVERS_ENV} is not a table of MCP servers: {error}") from None
    if any(not re.fullmatch(r"[A-Za-z0-9_-]+", server.name) for server in servers):
        raise SettingsError(f"{MCP_SERVERS_ENV}: a server name is not [A-Za-z0-9_-]+")
    return servers


def _positive(env: Mapping[str, str], name: str, minimum: int) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < minimum:
        raise SettingsError(f"{name} must be an integer >= {minimum}, not {raw[:40]!r}")
    return int(raw)


def settings_from(env: Mapping[str, str], prompt: str, runtime: str | None = None) -> Settings:
    """The run ``env`` describes; ``prompt`` was read by the caller (file or variable)."""
    chosen = (runtime or env.get(RUNTIME_ENV, "")).strip()
    if chosen not in RUNTIMES:
        raise SettingsError(f"unknown runtime {chosen[:40]!r} (one of: {', '.join(RUNTIMES)})")
    if not prompt.strip():
        raise SettingsError("the prompt is empty (AGENT_PROMPT_FILE or AGENT_PROMPT)")
    effort = env.get("AGENT_EFFORT", "").strip().lower()
    if effort and effort not in EFFORTS:
        raise SettingsError(f"AGENT_EFFORT must be one of {', '.join(EFFORTS)}")
    # Commas (or lines) separate tools: a pattern may hold spaces ("Bash(git log:*)").
    sandbox = env.get(CODEX_SANDBOX_ENV, "").strip()
    if sandbox and sandbox not in CODEX_SANDBOXES:
        raise SettingsError(f"{CODEX_SANDBOX_ENV} must be one of {', '.join(CODEX_SANDBOXES)}")
    tools = tuple(
        t.strip() for t in re.split(r"[,\n]", env.get(ALLOWED_TOOLS_ENV, "")) if t.strip()
    )
    return Settings(
        runtime=chosen,
        cli=env.get(CLI_ENV, "").strip() or DEFAULT_CLIS[chosen],
        prompt=prompt,
        model=env.get("AGENT_MODEL", "").strip(),
        effort=effort,
        max_turns=_positive(env, MAX_TURNS_ENV, 1),
        allowed_tools=tools,
        model_retries=_positive(env, MODEL_RETRIES_ENV, 0),
        base_url=env.get(CODEX_BASE_URL_ENV, "").strip() if chosen in (CODEX, OPENCODE) else "",
        codex_sandbox=sandbox,
        instructions=env.get(INSTRUCTIONS_ENV, "").strip(),
        protocol=env.get(PROTOCOL_ENV, "").strip(),
        mcp_servers=_mcp_servers(env.get(MCP_SERVERS_ENV, "")),
    )


@dataclass(frozen=True)
class Command:
    """How to start the CLI: its argv, the variables added to the pod's, and warnings."""

    argv: list[str]
    env: dict[str, str]
    warnings: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    """Files the runner writes (owner-only) before starting the CLI: name → content."""


def command_for(
    settings: Settings,
    env: Mapping[str, str] | None = None,
    scratch: str = ".",
    anchor_command: Sequence[str] = (),
) -> Command:
    """The CLI's command; ``env`` is the pod's (an MCP server's variables come from it),
    ``scratch`` a private directory for ``Command.files``, ``anchor_command`` how to
    print the job's anchor (``agentchain agent anchor``) for Claude Code's compaction
    hook."""
    if settings.runtime == CLAUDE_CODE:
        return _claude_command(settings, env or {}, scratch, anchor_command)
    if settings.runtime == OPENCODE:
        return _opencode_command(settings, env or {}, scratch)
    if settings.runtime == GEMINI:
        return _gemini_command(settings, env or {}, scratch)
    return _codex_command(settings, env or {})


def compact_hook_settings(anchor_command: Sequence[str]) -> str:
    """Claude Code settings (``--settings``) with seed 004's post-compaction recovery
    point: after Claude Code compacted its context (hook ``SessionStart``, matcher
    ``compact``), ``anchor_command`` prints the job's anchor as context for the model."""
    hook = {"type": "command", "command": shlex.join(anchor_command), "timeout": 30}
    return json.dumps({"hooks": {"SessionStart": [{"matcher": "compact", "hooks": [hook]}]}})


ANCHOR_RECOVERY_HEADING = "## Your anchor, restored after your context was compacted"


def anchor_context(anchor: Mapping[str, Any]) -> str:
    """What the compaction hook gives the model: its anchor, as a JSON block (its own
    words: data, shown as the API stored them)."""
    intro = (
        "Your context was just compacted. This is the anchor you kept with anchor_set: "
        "continue from it, do not repeat completed work, and keep its decisions."
    )
    # Indented JSON starts every value's line with whitespace or a bracket: nothing in
    # it can close the fence.
    body = json.dumps(dict(anchor), indent=2, ensure_ascii=False, default=str)
    return f"{ANCHOR_RECOVERY_HEADING}\n\n{intro}\n\n```json\n{body}\n```"


def session_start_output(context: str) -> str:
    """A ``SessionStart`` hook's answer that adds ``context`` for the model."""
    output = {"hookEventName": "SessionStart", "additionalContext": context}
    return json.dumps({"hookSpecificOutput": output})


def mcp_config(servers: tuple[McpServer, ...], env: Mapping[str, str]) -> str:
    """Claude Code's ``--mcp-config`` file, each server's variables with the pod's
    values (a file, not an argument: a secret in an argument is visible to ``ps``)."""
    table = {
        server.name: {
            "type": "stdio",
            "command": server.command,
            "args": list(server.args),
            "env": {name: env[name] for name in server.env if name in env},
        }
        for server in servers
    }
    return json.dumps({"mcpServers": table})


def _claude_command(
    settings: Settings, env: Mapping[str, str], scratch: str, anchor_command: Sequence[str]
) -> Command:
    argv = [settings.cli, "-p", "--output-format", "stream-json", "--verbose"]
    if settings.model:
        argv += ["--model", settings.model]
    if settings.effort:
        argv += ["--effort", settings.effort]
    if settings.max_turns is not None:
        argv += ["--max-turns", str(settings.max_turns)]
    if settings.allowed_tools:
        # One argument per tool: a tool pattern may hold spaces ("Bash(git log:*)").
        argv += ["--allowedTools", *settings.allowed_tools]
    if settings.standing_instructions:
        argv += ["--append-system-prompt", settings.standing_instructions]
    files = {}
    if settings.mcp_servers:
        path = f"{scratch.rstrip('/')}/{MCP_CONFIG_FILE}"
        files[path] = mcp_config(settings.mcp_servers, env)
        argv += ["--mcp-config", path]
    if anchor_command:
        path = f"{scratch.rstrip('/')}/{SETTINGS_FILE}"
        files[path] = compact_hook_settings(anchor_command)
        argv += ["--settings", path]
    added = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    if settings.model_retries is not None:
        added["CLAUDE_CODE_MAX_RETRIES"] = str(settings.model_retries)
    # Its own spans under the job's, when the pod traces (docs/observability.md).
    added.update(clitelemetry.claude_env(env))
    return Command(argv, added, files=files)


def _codex_command(settings: Settings, env: Mapping[str, str]) -> Command:
    argv = [settings.cli, "exec", "--json", "--skip-git-repo-check"]
    if settings.model:
        argv += ["--model", settings.model]
    if settings.effort:
        argv += ["-c", f"model_reasoning_effort={json.dumps(settings.effort)}"]
    warnings = []
    if settings.max_turns is not None:
        warnings.append(f"{MAX_TURNS_ENV} is ignored: codex exec has no turn limit")
    if settings.allowed_tools:
        warnings.append(f"{ALLOWED_TOOLS_ENV} is ignored: codex exec has no tool allow-list")
    if settings.codex_sandbox:
        argv += ["--sandbox", settings.codex_sandbox]
    else:
        # codex's own sandbox needs bubblewrap and user namespaces, which a restricted pod
        # does not grant (every command would fail); the pod is the sandbox: non-root, no
        # capabilities, no API credentials.
        argv.append("--dangerously-bypass-approvals-and-sandbox")
    argv += _codex_provider(settings)
    if settings.standing_instructions:
        text = json.dumps(settings.standing_instructions)
        argv += ["-c", f"developer_instructions={text}"]
    for server in settings.mcp_servers:
        # env_vars passes the pod's variables by name: no secret on the command line.
        key = f"mcp_servers.{server.name}"
        argv += ["-c", f"{key}.command={json.dumps(server.command)}"]
        argv += ["-c", f"{key}.args={json.dumps(list(server.args))}"]
        if server.env:
            argv += ["-c", f"{key}.env_vars={json.dumps(list(server.env))}"]
        # codex exec sends its first model request without waiting for the MCP servers
        # still starting (codex 0.169), so a model whose first step is a tool call would
        # not find the tool; a required server is waited for, and one that cannot start
        # fails the run, saying so, instead of leaving the model without its tools.
        argv += ["-c", f"{key}.required=true"]
        # Required, a server still starting when codex stops waiting fails the run: on a
        # busy node the Python of agentchain mcp took more than codex's 30 s to answer.
        argv += ["-c", f"{key}.startup_timeout_sec={CODEX_MCP_STARTUP_SECONDS}"]
    # Its own spans under the job's, when the pod traces (docs/observability.md).
    argv += clitelemetry.codex_overrides(env)
    argv.append("-")  # the prompt, from stdin
    return Command(argv, {}, warnings)


def _codex_provider(settings: Settings) -> list[str]:
    """``-c`` overrides for a model provider at ``base_url`` (Responses API, key from
    ``OPENAI_API_KEY``), and the retries of ``AGENTCHAIN_MODEL_RETRIES``.

    codex reads ``OPENAI_BASE_URL`` for its built-in provider too, but only a provider of
    its own takes retry settings, so the runner declares one. Values are JSON strings,
    which TOML reads as the same basic strings.
    """
    if not settings.base_url:
        return []
    fields = {
        "name": CODEX_PROVIDER,
        "base_url": settings.base_url,
        "wire_api": "responses",
        "env_key": "OPENAI_API_KEY",
    }
    table = ", ".join(f"{key} = {json.dumps(value)}" for key, value in fields.items())
    if settings.model_retries is not None:
        table += (
            f", request_max_retries = {settings.model_retries}"
            f", stream_max_retries = {settings.model_retries}"
        )
    return [
        "-c",
        f"model_provider={json.dumps(CODEX_PROVIDER)}",
        "-c",
        f"model_providers.{CODEX_PROVIDER}={{ {table} }}",
    ]


def opencode_config(settings: Settings, env: Mapping[str, str], instructions_file: str) -> str:
    """OpenCode's config file (``OPENCODE_CONFIG``): a file, not arguments, since an MCP
    server's variables may hold secrets, and the runner writes it owner-only."""
    config: dict[str, Any] = {
        "autoupdate": False,
        "share": "disabled",
        # A title for the session is one more model request per run, for nobody to read.
        "agent": {"title": {"disable": True}},
    }
    model = settings.model
    if settings.base_url:
        # The model server's own provider: OpenAI-compatible Chat Completions at the base
        # URL with OPENAI_API_KEY, knowing the one model the job asks for.
        name = model or "default"
        config["provider"] = {
            OPENCODE_PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": OPENCODE_PROVIDER,
                "options": {"baseURL": settings.base_url, "apiKey": "{env:OPENAI_API_KEY}"},
                "models": {name: {"name": name}},
            }
        }
        model = f"{OPENCODE_PROVIDER}/{name}"
    if model:
        config["model"] = model  # without a base URL: OpenCode's provider/model
    if settings.max_turns is not None:
        # On its last step OpenCode takes the tools away and asks for a summary: one step
        # more than the limit, so that a run reaching it wanted more turns than it had.
        config["agent"]["build"] = {"steps": settings.max_turns + 1}
    if settings.allowed_tools:
        # A denied tool is not even offered to the model: "*" first, the allowed after.
        rules = {"*": "deny", **{tool: "allow" for tool in settings.allowed_tools}}
        config["permission"] = rules
    if settings.standing_instructions:
        config["instructions"] = [instructions_file]
    if settings.mcp_servers:
        config["mcp"] = {
            server.name: {
                "type": "local",
                "command": [server.command, *server.args],
                "environment": {name: env[name] for name in server.env if name in env},
            }
            for server in settings.mcp_servers
        }
    return json.dumps(config)


def _opencode_command(settings: Settings, env: Mapping[str, str], scratch: str) -> Command:
    base = scratch.rstrip("/")
    config_path = f"{base}/{OPENCODE_CONFIG_FILE}"
    instructions_path = f"{base}/{OPENCODE_INSTRUCTIONS_FILE}"
    files = {config_path: opencode_config(settings, env, instructions_path)}
    if settings.standing_instructions:
        files[instructions_path] = settings.standing_instructions
    argv = [settings.cli, "run", "--format", "json"]
    if settings.effort:
        argv += ["--variant", settings.effort]
    added = {
        "OPENCODE_CONFIG": config_path,
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        # The workspace is the repository's: its opencode.json could point the provider,
        # and the key with it, elsewhere, or start MCP servers of its own.
        "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
    }
    if settings.base_url:
        # Its own provider needs no catalogue of models.dev (no egress to it either).
        added["OPENCODE_DISABLE_MODELS_FETCH"] = "1"
    warnings = []
    if settings.model_retries is not None:
        warnings.append(
            f"{MODEL_RETRIES_ENV} is ignored: opencode retries a failed model request 5 "
            "times, as the provider's retry-after says"
        )
    return Command(argv, added, warnings, files)


def gemini_settings(settings: Settings, env: Mapping[str, str]) -> str:
    """Gemini CLI's ``settings.json`` (user settings under ``GEMINI_CLI_HOME``)."""
    config: dict[str, Any] = {
        # With GOOGLE_GEMINI_BASE_URL set Gemini CLI would take the auth type for a
        # "gateway", which a headless run refuses: the key is GEMINI_API_KEY's.
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
    }
    if settings.model:
        config["model"] = {"name": settings.model}
    if settings.max_turns is not None:
        config.setdefault("model", {})["maxSessionTurns"] = settings.max_turns
    if settings.model_retries is not None:
        attempts = min(settings.model_retries + 1, GEMINI_MAX_ATTEMPTS)
        config["general"]["maxAttempts"] = attempts
    if settings.allowed_tools:
        config["tools"] = {"allowed": list(settings.allowed_tools)}
    if settings.mcp_servers:
        config["mcpServers"] = {
            server.name: {
                "command": server.command,
                "args": list(server.args),
                "env": {name: env[name] for name in server.env if name in env},
                # A headless run cannot confirm a tool call: the agentchain tools, which
                # gain nothing beyond the job's token, need none; other servers' tools
                # are allowed by name (allowedTools).
                "trust": server.name == AGENTCHAIN_SERVER,
            }
            for server in settings.mcp_servers
        }
    return json.dumps(config)


def _gemini_command(settings: Settings, env: Mapping[str, str], scratch: str) -> Command:
    home = f"{scratch.rstrip('/')}/{GEMINI_HOME}"
    files = {f"{home}/.gemini/settings.json": gemini_settings(settings, env)}
    if settings.standing_instructions:
        # The global context file of this home: loaded into every request's context.
        files[f"{home}/.gemini/GEMINI.md"] = settings.standing_instructions
    # "-p" with an empty prompt: the prompt is stdin's. A headless run refuses a folder
    # it was not told to trust; --skip-trust runs there without trusting it, so the
    # workspace's own .gemini/settings.json (the repository's words) is not loaded: it
    # could set the model, the allowed tools or MCP servers of its own.
    argv = [settings.cli, "-p", "", "--output-format", "stream-json", "--skip-trust"]
    added = {"GEMINI_CLI_HOME": home, **clitelemetry.gemini_env(env)}
    warnings = []
    if settings.effort:
        warnings.append("AGENT_EFFORT is ignored: gemini has no effort setting")
    return Command(argv, added, warnings, files)


def one_line(text: str, limit: int = MESSAGE_MAX_CHARS) -> str:
    """``text`` (untrusted: the CLI's or the provider's words) as one bounded line."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass
class Transcript:
    """What the runner has read of one run's event stream so far."""

    runtime: str
    result: dict[str, Any] | None = None  # claude-code: the final ``result`` event
    messages: list[str] = field(default_factory=list)  # codex: its agent_message texts
    errors: list[str] = field(default_factory=list)  # codex: error / turn.failed messages
    tokens: int = 0  # codex, opencode: summed over turn.completed / step_finish
    input_tokens: int = 0  # codex, opencode: the prompt's share of tokens, cache included
    output_tokens: int = 0  # codex, opencode: the model's share (reasoning included)
    turns: int = 0  # codex, opencode: turn.completed / step_finish events
    cost: float = 0.0  # opencode: summed over step_finish
    step_texts: list[str] = field(default_factory=list)  # opencode, gemini: this turn's text
    max_turns: int | None = None  # opencode: the turn limit, read at the end
    status: int | None = None  # opencode: the HTTP status of its last error event
    after_tools: bool = False  # gemini: tool results went back since the model's output

    def feed(self, line: str) -> dict[str, Any] | None:
        """Take one line of the CLI's stdout; the event it holds, if it is one."""
        try:
            event = json.loads(line)
        except ValueError:
            return None
        if not isinstance(event, dict):
            return None
        if self.runtime == CLAUDE_CODE:
            if event.get("type") == "result":
                self.result = event
        elif self.runtime == OPENCODE:
            self._feed_opencode(event)
        elif self.runtime == GEMINI:
            self._feed_gemini(event)
        else:
            self._feed_codex(event)
        return event

    def _feed_gemini(self, event: dict[str, Any]) -> None:
        """Gemini CLI's ``stream-json``: the assistant's text in deltas, tool calls and
        their results, and the ``result`` (status, error, token stats). A turn starts
        with the model's first output after the prompt or after tool results."""
        kind = event.get("type")
        if kind == "result":
            self.result = event
            return
        model_output = kind == "tool_use" or (
            kind == "message" and event.get("role") == "assistant"
        )
        if model_output and (self.turns == 0 or self.after_tools):
            self.turns += 1
            self.step_texts = []
            self.after_tools = False
        if kind == "message" and event.get("role") == "assistant":
            self.step_texts.append(str(event.get("content", "")))
        elif kind == "tool_result":
            self.after_tools = True

    def _feed_opencode(self, event: dict[str, Any]) -> None:
        """``opencode run --format json``: a step's ``text`` parts between its
        ``step_start`` and ``step_finish`` (with its tokens and cost); ``error``."""
        kind = event.get("type")
        part = _object(event.get("part"))
        if kind == "step_start":
            self.step_texts = []
        elif kind == "text":
            self.step_texts.append(str(part.get("text", "")))
        elif kind == "step_finish":
            self.turns += 1
            tokens = _object(part.get("tokens"))
            cache = _object(tokens.get("cache"))
            read = [tokens.get("input"), cache.get("read"), cache.get("write")]
            written = [tokens.get("output"), tokens.get("reasoning")]
            self.input_tokens += sum(_count(value) for value in read)
            self.output_tokens += sum(_count(value) for value in written)
            self.tokens += sum(_count(value) for value in read + written)
            self.cost += _cost(part.get("cost"))
            self.messages.append("".join(self.step_texts))
        elif kind == "error":
            error = _object(event.get("error"))
            data = _object(error.get("data"))
            status = data.get("statusCode")
            said = str(data.get("message") or error.get("name") or "error")
            self.status = None
            if isinstance(status, int) and not isinstance(status, bool):
                said = f"HTTP {status}: {said}"
                self.status = status
            self.errors.append(said)

    def _feed_codex(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        item = _object(event.get("item"))
        if kind == "item.completed" and item.get("type") == "agent_message":
            self.messages.append(str(item.get("text", "")))
        elif kind == "turn.completed":
            self.turns += 1
            usage = _object(event.get("usage"))
            # Its input_tokens already count the cached ones (cached_input_tokens).
            read, written = _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))
            self.input_tokens += read
            self.output_tokens += written
            self.tokens += read + written
        elif kind == "turn.failed":
            error = _object(event.get("error"))
            self.errors.append(str(error.get("message", "")))
        elif kind == "error":
            self.errors.append(str(event.get("message", "")))


def _object(value: Any) -> dict[str, Any]:
    """``value`` if the CLI sent a JSON object there, else an empty one."""
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    """A token or turn count the CLI reported; 0 for anything but a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return max(value, 0)


def _cost(value: Any) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    return float(value) if ok else 0.0


@dataclass(frozen=True)
class Outcome:
    """How a run ended: the exit code, the answer (stdout) or the one-line message."""

    exit_code: int
    answer: str = ""
    message: str = ""
    tokens: int = 0
    cost: float = 0.0
    turns: int = 0
    input_tokens: int = 0
    """The prompt's share of ``tokens`` (cached input included), as the CLI split it."""
    output_tokens: int = 0
    """The model's share of ``tokens`` (its reasoning included)."""


def _status_exit(status: int) -> int:
    if status in (401, 403):
        return exits.EXIT_MODEL_AUTH
    if status == 429:
        return exits.EXIT_MODEL_RATE_LIMITED
    if status >= 500:
        return exits.EXIT_MODEL_UNAVAILABLE
    return exits.EXIT_MODEL_REQUEST_REJECTED


@dataclass(frozen=True)
class Usage:
    tokens: int = 0
    cost: float = 0.0
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


def _outcome_of(code: int, answer: str, message: str, usage: Usage) -> Outcome:
    return Outcome(
        code,
        answer,
        message,
        usage.tokens,
        usage.cost,
        usage.turns,
        usage.input_tokens,
        usage.output_tokens,
    )


def _ok(answer: str, usage: Usage) -> Outcome:
    return _outcome_of(exits.EXIT_OK, answer, "", usage)


def _failure(code: int, detail: str, usage: Usage | None = None) -> Outcome:
    reason = exits.reason_of_exit(code)
    summary = reason.summary if reason is not None else "the agent failed"
    message = one_line(f"{summary}: {detail}" if detail else summary)
    return _outcome_of(code, "", message, usage or Usage())


def outcome(transcript: Transcript, returncode: int, stderr_tail: str) -> Outcome:
    """The end of a run, from what the CLI printed and its exit status."""
    if transcript.runtime == CLAUDE_CODE:
        return _claude_outcome(transcript.result, returncode, stderr_tail)
    if transcript.runtime == OPENCODE:
        return _opencode_outcome(transcript, returncode, stderr_tail)
    if transcript.runtime == GEMINI:
        return _gemini_outcome(transcript, returncode, stderr_tail)
    return _codex_outcome(transcript, returncode, stderr_tail)


def _claude_usage(result: Mapping[str, Any]) -> Usage:
    usage = _object(result.get("usage"))
    # The cache's reads and writes are input too (the GenAI conventions count them in).
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    read = sum(_count(usage.get(key)) for key in keys)
    written = _count(usage.get("output_tokens"))
    return Usage(
        tokens=read + written,
        cost=_cost(result.get("total_cost_usd")),
        turns=_count(result.get("num_turns")),
        input_tokens=read,
        output_tokens=written,
    )


def _claude_outcome(result: dict[str, Any] | None, returncode: int, stderr_tail: str) -> Outcome:
    if result is None:
        detail = f"claude exited {returncode} with no result"
        tail = one_line(stderr_tail, 200)
        return _failure(exits.EXIT_AGENT_FAILED, f"{detail}: {tail}" if tail else detail)
    usage = _claude_usage(result)
    text = str(result.get("result") or "")
    errors = result.get("errors")
    errors = errors if isinstance(errors, list) else []
    detail = text or "; ".join(str(e) for e in errors)
    status = result.get("api_error_status")
    if result.get("subtype") == "error_max_turns" or result.get("terminal_reason") == "max_turns":
        return _failure(exits.EXIT_TURN_LIMIT, detail, usage)
    if isinstance(status, int) and not isinstance(status, bool) and status >= 400:
        kind = result.get("api_error_type")
        said = f"HTTP {status}" + (f" {kind}" if isinstance(kind, str) and kind else "")
        return _failure(_status_exit(status), f"{said}: {detail}", usage)
    if result.get("terminal_reason") == "api_error":
        return _failure(exits.EXIT_MODEL_UNAVAILABLE, detail, usage)
    if result.get("is_error") or returncode != 0 or not text.strip():
        return _failure(exits.EXIT_AGENT_FAILED, detail or f"claude exited {returncode}", usage)
    return _ok(text, usage)


_STATUS_IN_TEXT = re.compile(
    r"\b(401|403|429|5\d\d)\b|unauthorized|too many requests|high demand", re.I
)
# codex words some statuses without their number: a 5xx is "high demand" (codex 0.169).
_STATUS_WORDS = {"unauthorized": 401, "too many requests": 429, "high demand": 500}


def _status_in(text: str) -> int | None:
    """The HTTP status a codex error message names (codex reports no status field)."""
    found = _STATUS_IN_TEXT.search(text)
    if found is None:
        return None
    word = found.group(0).lower()
    return _STATUS_WORDS.get(word) or int(word)


def _codex_outcome(transcript: Transcript, returncode: int, stderr_tail: str) -> Outcome:
    usage = Usage(
        tokens=transcript.tokens,
        turns=transcript.turns,
        input_tokens=transcript.input_tokens,
        output_tokens=transcript.output_tokens,
    )
    if transcript.errors:
        detail = transcript.errors[-1]
        status = _status_in(detail)
        code = _status_exit(status) if status is not None else exits.EXIT_AGENT_FAILED
        return _failure(code, detail, usage)
    answer = transcript.messages[-1] if transcript.messages else ""
    if returncode != 0 or not answer.strip():
        tail = one_line(stderr_tail, 200)
        return _failure(exits.EXIT_AGENT_FAILED, f"codex exited {returncode}: {tail}", usage)
    return _ok(answer, usage)


_GOOGLE_CODE = re.compile(r'"code"\s*:\s*(\d{3})\b')
_GEMINI_QUOTA = re.compile(r"request a quota increase|resource.?exhausted", re.I)


def _gemini_outcome(transcript: Transcript, returncode: int, stderr_tail: str) -> Outcome:
    result = transcript.result
    if result is None:
        tail = one_line(stderr_tail, 200)
        return _failure(exits.EXIT_AGENT_FAILED, f"gemini exited {returncode}: {tail}")
    stats = _object(result.get("stats"))
    # Its total may count more than the two (thoughts, tool calls): the total is kept,
    # never below them (the job API refuses a split over its total).
    read, written = _count(stats.get("input_tokens")), _count(stats.get("output_tokens"))
    tokens = max(_count(stats.get("total_tokens")), read + written)
    usage = Usage(tokens, turns=transcript.turns, input_tokens=read, output_tokens=written)
    if result.get("status") != "success":
        error = _object(result.get("error"))
        detail = str(error.get("message") or error.get("type") or "error")
        if error.get("type") == "FatalTurnLimitedError":
            return _failure(exits.EXIT_TURN_LIMIT, detail, usage)
        # An API error is Google's JSON body in the message: its "code" is the status.
        found = _GOOGLE_CODE.search(detail)
        status = int(found.group(1)) if found else _status_in(detail)
        if status is None and _GEMINI_QUOTA.search(detail):
            status = 429  # After its retries Gemini CLI words a 429 without the body.
        if status is not None and status >= 400:
            return _failure(_status_exit(status), detail, usage)
        return _failure(exits.EXIT_AGENT_FAILED, detail, usage)
    answer = "".join(transcript.step_texts)
    if returncode != 0 or not answer.strip():
        tail = one_line(stderr_tail, 200)
        return _failure(exits.EXIT_AGENT_FAILED, f"gemini exited {returncode}: {tail}", usage)
    return _ok(answer, usage)


def _opencode_outcome(transcript: Transcript, returncode: int, stderr_tail: str) -> Outcome:
    usage = Usage(
        tokens=transcript.tokens,
        cost=transcript.cost,
        turns=transcript.turns,
        input_tokens=transcript.input_tokens,
        output_tokens=transcript.output_tokens,
    )
    if transcript.errors:
        detail = transcript.errors[-1]
        status = transcript.status or _status_in(detail)
        code = _status_exit(status) if status is not None else exits.EXIT_AGENT_FAILED
        return _failure(code, detail, usage)
    answer = transcript.messages[-1] if transcript.messages else ""
    limit = transcript.max_turns
    if limit is not None and transcript.turns > limit:
        # The step past the limit is OpenCode's forced summary: the work was cut short.
        said = f"used {limit} turns without finishing: {answer}"
        return _failure(exits.EXIT_TURN_LIMIT, said, usage)
    if returncode != 0 or not answer.strip():
        tail = one_line(stderr_tail, 200)
        return _failure(exits.EXIT_AGENT_FAILED, f"opencode exited {returncode}: {tail}", usage)
    return _ok(answer, usage)


def log_line(runtime: str, event: Mapping[str, Any]) -> str | None:
    """One event as a line of the pod's log; None for events not worth a line."""
    kind = str(event.get("type", ""))
    text: str | None
    if runtime == CLAUDE_CODE:
        text = _claude_log(kind, event)
    elif runtime == OPENCODE:
        text = _opencode_log(kind, event)
    elif runtime == GEMINI:
        text = _gemini_log(kind, event)
    else:
        text = _codex_log(kind, event)
    return None if text is None else one_line(text, LOG_LINE_MAX_CHARS)


def _blocks(event: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = _object(event.get("message")).get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _claude_log(kind: str, event: Mapping[str, Any]) -> str | None:
    if kind == "system":
        if event.get("subtype") != "init":
            return None
        return f"[system] session started, model {event.get('model', '?')}"
    if kind in ("assistant", "user"):
        parts = []
        for block in _blocks(event):
            if block.get("type") == "text":
                parts.append(f"[{kind}] {block.get('text', '')}")
            elif block.get("type") == "tool_use":
                parts.append(f"[tool call] {block.get('name')} {json.dumps(block.get('input'))}")
            elif block.get("type") == "tool_result":
                parts.append(f"[tool result] {json.dumps(block.get('content'))}")
        return " | ".join(parts) or None
    if kind == "result":
        return (
            f"[result] {event.get('subtype')}, {event.get('num_turns')} turns, "
            f"cost {event.get('total_cost_usd')} USD"
        )
    return None


def _codex_log(kind: str, event: Mapping[str, Any]) -> str | None:
    item = _object(event.get("item"))
    if kind == "item.completed":
        return f"[{item.get('type', 'item')}] {json.dumps(item)}"
    if kind in ("turn.completed", "turn.failed", "error", "thread.started"):
        return f"[{kind}] {json.dumps(dict(event))}"
    return None


def _opencode_log(kind: str, event: Mapping[str, Any]) -> str | None:
    part = _object(event.get("part"))
    if kind == "text":
        return f"[assistant] {part.get('text', '')}"
    if kind == "tool_use":
        state = _object(part.get("state"))
        said = f"[tool call] {part.get('tool')} {json.dumps(state.get('input'))}"
        if "output" in state or "error" in state:
            said += f" | [tool result] {json.dumps(state.get('output', state.get('error')))}"
        return said
    if kind == "step_finish":
        return f"[step] {part.get('reason')}, tokens {json.dumps(part.get('tokens'))}"
    if kind == "error":
        return f"[error] {json.dumps(event.get('error'))}"
    return None


def _gemini_log(kind: str, event: Mapping[str, Any]) -> str | None:
    if kind == "init":
        return f"[system] session started, model {event.get('model', '?')}"
    if kind == "message" and event.get("role") == "assistant":
        return f"[assistant] {event.get('content', '')}"
    if kind == "tool_use":
        return f"[tool call] {event.get('tool_name')} {json.dumps(event.get('parameters'))}"
    if kind == "tool_result":
        return f"[tool result] {event.get('status')} {json.dumps(event.get('output'))}"
    if kind == "result":
        return f"[result] {event.get('status')} {json.dumps(event.get('error'))}"
    return None
