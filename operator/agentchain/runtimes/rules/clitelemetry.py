"""Turning on an agent CLI's own OpenTelemetry traces, as pure functions: no I/O.

An agent's pod gets its job's ``TRACEPARENT`` and, when the operator exports traces, the
OTLP endpoint (``traces/rules/spans.agent_env``).  With both, the runner turns on the
CLI's own trace export so that the model's turns and tool calls nest under the job's span
in the chain's one trace; with either missing, it turns on nothing.

- **Claude Code** exports traces when ``CLAUDE_CODE_ENABLE_TELEMETRY`` and its (beta)
  ``CLAUDE_CODE_ENHANCED_TELEMETRY_BETA`` are set and ``OTEL_TRACES_EXPORTER`` is
  ``otlp``; it reads the endpoint and protocol from the standard ``OTEL_*`` variables and,
  run non-interactively, starts its ``claude_code.interaction`` span under
  ``TRACEPARENT`` (Claude Code 2.1).
- **Codex** exports traces when its config's ``otel.trace_exporter`` names an OTLP
  exporter, given here as ``-c`` overrides (the endpoint is not a secret; headers, which
  may be, stay in the environment).  Its ``codex.exec`` span starts under
  ``TRACEPARENT``, but some of its spans (its session loop, auth and file reads started
  off that span) begin traces of their own (codex 0.169), which would scatter one run
  over a dozen traces.  So codex exports to a relay of the runner's on 127.0.0.1
  (``runtimes/inpod/otlprelay``), which moves every span into the job's trace, a root
  under the job's span (``adopt``), before forwarding to the pod's endpoint.

Metrics and log events are left as the pod's variables say: only traces are turned on.

Text the model read or wrote (the prompt, tool arguments and results, answers) stays out
of the spans unless the agent's own environment opts in with the CLIs' documented
variables (``OTEL_LOG_USER_PROMPTS``, and Claude Code's ``OTEL_LOG_TOOL_DETAILS`` /
``OTEL_LOG_TOOL_CONTENT``): the runner never sets them, Claude Code redacts without
them, and codex is told ``otel.log_user_prompt=false`` unless ``OTEL_LOG_USER_PROMPTS``
is set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentchain.traces.rules import spans

RELAYED_RUNTIMES = ("codex",)
"""The CLIs whose spans go through the runner's relay: they start traces of their own."""
CONTENT_OPT_IN_ENV = "OTEL_LOG_USER_PROMPTS"
"""The one variable that lets a CLI put the prompt's text in its telemetry."""
_TRUE = ("1", "true", "yes", "on")


def enabled(env: Mapping[str, str]) -> bool:
    """Whether the pod asks for the CLI's spans: a valid ``TRACEPARENT`` to nest them
    under, and the ``OTEL_*`` variables naming where to export (not turned off)."""
    parent = spans.parse_traceparent(env.get(spans.TRACEPARENT_ENV, ""))
    return parent is not None and spans.configured(env)


def content_opted_in(env: Mapping[str, str]) -> bool:
    return env.get(CONTENT_OPT_IN_ENV, "").strip().lower() in _TRUE


def claude_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that turn on Claude Code's trace export (none when ``enabled`` is
    not): its own switches, and traces to OTLP unless the pod chose an exporter."""
    if not enabled(env):
        return {}
    added = {"CLAUDE_CODE_ENABLE_TELEMETRY": "1", "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1"}
    if not env.get("OTEL_TRACES_EXPORTER", "").strip():
        added["OTEL_TRACES_EXPORTER"] = "otlp"
    return added


def traces_endpoint(env: Mapping[str, str]) -> str:
    """The full OTLP/HTTP traces URL, as the SDKs derive it: the traces endpoint as
    given, else the base endpoint with ``/v1/traces`` appended."""
    exact = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if exact:
        return exact
    return env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip().rstrip("/") + "/v1/traces"


def codex_overrides(env: Mapping[str, str]) -> list[str]:
    """``codex exec`` ``-c`` overrides that turn on its trace export (none when
    ``enabled`` is not), and keep the prompt out of its telemetry unless opted in."""
    if not enabled(env):
        return []
    wire = protocol(env)
    if wire == "grpc":
        base = (
            env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
            or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        )
        exporter = f"{{ otlp-grpc = {{ endpoint = {json.dumps(base)} }} }}"
    else:
        body = "json" if wire == "http/json" else "binary"
        fields = f"endpoint = {json.dumps(traces_endpoint(env))}, protocol = {json.dumps(body)}"
        exporter = f"{{ otlp-http = {{ {fields} }} }}"
    prompts = "true" if content_opted_in(env) else "false"
    return ["-c", f"otel.trace_exporter={exporter}", "-c", f"otel.log_user_prompt={prompts}"]


def protocol(env: Mapping[str, str]) -> str:
    """The OTLP protocol of the pod's trace export (the SDKs' default: protobuf)."""
    return (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "").strip()
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip()
        or "http/protobuf"
    )


def relayed(runtime: str, env: Mapping[str, str]) -> bool:
    """Whether ``runtime``'s spans go through the runner's relay: a CLI that starts
    traces of its own, when the pod traces over OTLP/HTTP (gRPC is not relayed)."""
    return runtime in RELAYED_RUNTIMES and enabled(env) and protocol(env) != "grpc"


def relayed_env(env: Mapping[str, str], relay_url: str) -> dict[str, str]:
    """The pod's variables as a CLI exporting through the relay at ``relay_url`` sees
    them: its traces, OTLP/HTTP protobuf, to the relay (which forwards them)."""
    return {
        **env,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{relay_url.rstrip('/')}/v1/traces",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
    }


def adopt(request: ExportTraceServiceRequest, trace: int, job_span: int) -> int:
    """Move every span of ``request`` into trace ``trace``, and hang every span without
    a parent under ``job_span``; the number of spans changed.  A span keeps its own id
    and its parent: a CLI's span tree stays as it was, whole, under the job's span."""
    trace_id, parent_id = trace.to_bytes(16, "big"), job_span.to_bytes(8, "big")
    changed = 0
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                if span.trace_id == trace_id and span.parent_span_id:
                    continue
                span.trace_id = trace_id
                if not span.parent_span_id:
                    span.parent_span_id = parent_id
                changed += 1
    return changed
