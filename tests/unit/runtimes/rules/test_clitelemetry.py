"""Turning on the agent CLIs' own traces (``runtimes/rules/clitelemetry.py``).

Aspects covered:
- nothing is turned on without both a valid ``TRACEPARENT`` and an OTLP endpoint, nor
  when the ``OTEL_*`` variables turn tracing off;
- Claude Code gets its two switches and an OTLP traces exporter, the pod's own exporter
  choice kept;
- no CLI ever gets a content switch from the runner; codex's prompt logging is pinned
  off unless the agent's own ``OTEL_LOG_USER_PROMPTS`` opts in;
- codex gets an OTLP/HTTP traces exporter at the full traces URL (or gRPC at the
  endpoint), in the pod's protocol, and ``log_user_prompt`` false unless
  ``OTEL_LOG_USER_PROMPTS`` opts in;
- the runner's command carries them for Claude Code, codex and (relayed) Gemini CLI,
  and not for OpenCode;
- Gemini CLI is turned on only through the relay (its endpoint, its usage on its spans,
  its prompt logging off unless opted in); the relay's redaction removes the GenAI
  content attributes and nothing else;
- codex and Gemini CLI go through the runner's relay, over OTLP/HTTP only, and export to it;
  the relay's adoption moves every span into the job's trace, roots under the job's
  span, other parents kept.
"""

from __future__ import annotations

import tomllib

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentchain.runtimes.rules import clis, clitelemetry

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TRACED = {
    "TRACEPARENT": PARENT,
    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otelcol.obs:4318/",
    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
}
CONTENT_SWITCHES = ("OTEL_LOG_USER_PROMPTS", "OTEL_LOG_TOOL_DETAILS", "OTEL_LOG_TOOL_CONTENT")


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"TRACEPARENT": PARENT},
        {k: v for k, v in TRACED.items() if k != "TRACEPARENT"},
        {**TRACED, "TRACEPARENT": "00-zz-b7ad6b7169203331-01"},
        {**TRACED, "OTEL_SDK_DISABLED": "true"},
        {**TRACED, "OTEL_TRACES_EXPORTER": "none"},
    ],
)
def test_nothing_is_turned_on_unless_the_pod_traces(env: dict[str, str]) -> None:
    assert not clitelemetry.enabled(env)
    assert clitelemetry.claude_env(env) == {}
    assert clitelemetry.codex_overrides(env) == []


def test_claude_code_gets_its_switches_and_an_otlp_traces_exporter() -> None:
    assert clitelemetry.claude_env(TRACED) == {
        "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
        "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1",
        "OTEL_TRACES_EXPORTER": "otlp",
    }
    chosen = clitelemetry.claude_env({**TRACED, "OTEL_TRACES_EXPORTER": "otlp,console"})
    assert "OTEL_TRACES_EXPORTER" not in chosen  # The pod's choice stands.


def test_the_words_stay_out_of_the_spans_unless_the_agent_opts_in() -> None:
    """The runner never sets a CLI's content switch; codex's default is pinned off, and
    only the agent's own ``OTEL_LOG_USER_PROMPTS`` turns it on."""
    for env in (TRACED, {**TRACED, "OTEL_LOG_USER_PROMPTS": "1"}):
        for runtime in clis.RUNTIMES:
            settings = clis.settings_from({"AGENTCHAIN_RUNTIME": runtime, **env}, "do it")
            command = clis.command_for(settings, env, "/run/x")
            assert not set(command.env) & set(CONTENT_SWITCHES), runtime
    assert "otel.log_user_prompt=false" in clitelemetry.codex_overrides(TRACED)
    for no in ("", "0", "false"):
        off = clitelemetry.codex_overrides({**TRACED, "OTEL_LOG_USER_PROMPTS": no})
        assert "otel.log_user_prompt=false" in off
    on = clitelemetry.codex_overrides({**TRACED, "OTEL_LOG_USER_PROMPTS": "1"})
    assert "otel.log_user_prompt=true" in on


def _codex_otel(overrides: list[str]) -> dict[str, object]:
    """The ``-c key=value`` overrides read back as codex reads them (TOML values)."""
    assert overrides[::2] == ["-c"] * (len(overrides) // 2)
    table: dict[str, object] = {}
    for item in overrides[1::2]:
        key, value = item.split("=", 1)
        table[key] = tomllib.loads(f"v = {value}")["v"]
    return table


def test_codex_exports_to_the_traces_url_and_keeps_the_prompt_out() -> None:
    assert _codex_otel(clitelemetry.codex_overrides(TRACED)) == {
        "otel.trace_exporter": {
            "otlp-http": {"endpoint": "http://otelcol.obs:4318/v1/traces", "protocol": "binary"}
        },
        "otel.log_user_prompt": False,
    }
    exact = {**TRACED, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://x/otlp/traces"}
    exact["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/json"
    assert _codex_otel(clitelemetry.codex_overrides(exact))["otel.trace_exporter"] == {
        "otlp-http": {"endpoint": "https://x/otlp/traces", "protocol": "json"}
    }
    grpc = {**TRACED, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    assert _codex_otel(clitelemetry.codex_overrides(grpc))["otel.trace_exporter"] == {
        "otlp-grpc": {"endpoint": "http://otelcol.obs:4318/"}
    }
    opted = clitelemetry.codex_overrides({**TRACED, "OTEL_LOG_USER_PROMPTS": "true"})
    assert _codex_otel(opted)["otel.log_user_prompt"] is True


def test_the_runner_command_carries_them_for_claude_code_codex_and_gemini() -> None:
    def command(runtime: str, env: dict[str, str]) -> clis.Command:
        settings = clis.settings_from({"AGENTCHAIN_RUNTIME": runtime, **env}, "do it")
        return clis.command_for(settings, env, "/run/x")

    claude = command("claude-code", TRACED)
    assert claude.env["CLAUDE_CODE_ENHANCED_TELEMETRY_BETA"] == "1"
    assert "CLAUDE_CODE_ENABLE_TELEMETRY" not in command("claude-code", {}).env
    codex = command("codex", TRACED).argv
    assert codex[-1] == "-" and "otel.log_user_prompt=false" in codex
    assert not any(a.startswith("otel.") for a in command("codex", {}).argv)
    for other in ("opencode", "gemini"):
        built = command(other, TRACED)
        assert "CLAUDE_CODE_ENABLE_TELEMETRY" not in built.env
        assert not any("otel" in a for a in built.argv)
        assert "GEMINI_TELEMETRY_ENABLED" not in built.env  # No relay: not turned on.
    relayed = clitelemetry.relayed_env(TRACED, "http://127.0.0.1:4999")
    gemini = command("gemini", relayed).env
    assert gemini["GEMINI_TELEMETRY_OTLP_ENDPOINT"] == "http://127.0.0.1:4999"
    assert "GEMINI_TELEMETRY_ENABLED" not in command("opencode", relayed).env


def _request(*found: tuple[bytes, bytes, bytes]) -> ExportTraceServiceRequest:
    """An export request of spans (trace id, span id, parent span id)."""
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for trace, span, parent in found:
        scope.spans.add(trace_id=trace, span_id=span, parent_span_id=parent, name="s")
    return request


def test_adopt_moves_every_span_into_the_job_trace_with_roots_under_the_job() -> None:
    trace, job = 0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331
    mine, other = trace.to_bytes(16, "big"), b"\x01" * 16
    request = _request(
        (mine, b"a" * 8, b"p" * 8),  # under a span of its own, in the job's trace: as is
        (mine, b"b" * 8, b""),  # a root in the job's trace: under the job
        (other, b"c" * 8, b""),  # a root of a trace of its own: moved, under the job
        (other, b"d" * 8, b"c" * 8),  # its child: moved, its parent kept
    )
    assert clitelemetry.adopt(request, trace, job) == 3
    got = [
        (s.trace_id, s.span_id, s.parent_span_id)
        for s in request.resource_spans[0].scope_spans[0].spans
    ]
    under_job = job.to_bytes(8, "big")
    assert got == [
        (mine, b"a" * 8, b"p" * 8),
        (mine, b"b" * 8, under_job),
        (mine, b"c" * 8, under_job),
        (mine, b"d" * 8, b"c" * 8),
    ]


def test_gemini_exports_to_the_relay_alone_and_keeps_the_prompt_out() -> None:
    assert clitelemetry.gemini_env(TRACED) == {}  # Straight to the collector: never.
    relayed = clitelemetry.relayed_env(TRACED, "http://127.0.0.1:4999/")
    assert clitelemetry.gemini_env(relayed) == {
        "GEMINI_TELEMETRY_ENABLED": "true",
        "GEMINI_TELEMETRY_TARGET": "local",
        "GEMINI_TELEMETRY_OTLP_PROTOCOL": "http",
        "GEMINI_TELEMETRY_OTLP_ENDPOINT": "http://127.0.0.1:4999",
        "GEMINI_TELEMETRY_TRACES_ENABLED": "true",
        "GEMINI_TELEMETRY_LOG_PROMPTS": "false",
    }
    opted = clitelemetry.gemini_env({**relayed, "OTEL_LOG_USER_PROMPTS": "1"})
    assert opted["GEMINI_TELEMETRY_LOG_PROMPTS"] == "true"
    assert clitelemetry.gemini_env({**relayed, "OTEL_SDK_DISABLED": "true"}) == {}


def test_redact_removes_the_content_attributes_and_keeps_the_rest() -> None:
    request = _request((b"\x01" * 16, b"a" * 8, b""))
    span = request.resource_spans[0].scope_spans[0].spans[0]
    for key in ("gen_ai.system_instructions", "gen_ai.request.model", "gen_ai.input.messages"):
        span.attributes.add(key=key).value.string_value = "x"
    assert clitelemetry.redact(request) == 2
    assert [a.key for a in span.attributes] == ["gen_ai.request.model"]
    assert clitelemetry.redact(request) == 0


def test_codex_and_gemini_are_relayed_and_only_over_http() -> None:
    assert clitelemetry.relayed("codex", TRACED)
    assert clitelemetry.relayed("gemini", TRACED)
    assert not clitelemetry.relayed("claude-code", TRACED)
    assert not clitelemetry.relayed("codex", {})
    assert not clitelemetry.relayed("codex", {**TRACED, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    env = clitelemetry.relayed_env(TRACED, "http://127.0.0.1:4999/")
    assert _codex_otel(clitelemetry.codex_overrides(env))["otel.trace_exporter"] == {
        "otlp-http": {"endpoint": "http://127.0.0.1:4999/v1/traces", "protocol": "binary"}
    }
    assert env["TRACEPARENT"] == PARENT
