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

- **Gemini CLI** exports when ``GEMINI_TELEMETRY_ENABLED`` is set, to its own endpoint
  variable, in OTLP's JSON (``from_json``), and then sends its logs and metrics there too
  (Gemini CLI 0.61); it starts
  its spans (an ``llm_call`` per model request, with ``gen_ai.usage.*`` when its
  ``GEMINI_TELEMETRY_TRACES_ENABLED`` is on) in traces of their own, ignoring
  ``TRACEPARENT``.  So it is turned on only through the relay, which adopts its spans and
  answers its logs and metrics without sending them anywhere (``gemini_env``).

Metrics and log events are left as the pod's variables say: only traces are turned on.

Text the model read or wrote (the prompt, tool arguments and results, answers) stays out
of the spans unless the agent's own environment opts in with the CLIs' documented
variables (``OTEL_LOG_USER_PROMPTS``, and Claude Code's ``OTEL_LOG_TOOL_DETAILS`` /
``OTEL_LOG_TOOL_CONTENT``): the runner never sets them, Claude Code redacts without
them, codex is told ``otel.log_user_prompt=false`` and Gemini CLI
``GEMINI_TELEMETRY_LOG_PROMPTS=false`` unless ``OTEL_LOG_USER_PROMPTS`` is set.  Gemini
CLI puts its system instructions (its context files: a repository's ``GEMINI.md`` among
them) on every span whatever it is told, so the relay removes the GenAI conventions'
content attributes (:data:`CONTENT_ATTRIBUTES`) from every span it forwards unless the
agent opted in (``redact``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agentchain.traces.rules import spans

RELAYED_RUNTIMES = ("codex", "gemini")
"""The CLIs whose spans go through the runner's relay: they start traces of their own."""
RELAY_ENV = "AGENTCHAIN_TRACE_RELAY"
"""The relay's URL, in the environment the runner gives a relayed CLI."""
CONTENT_ATTRIBUTES = frozenset(
    {"gen_ai.system_instructions", "gen_ai.input.messages", "gen_ai.output.messages"}
)
"""The GenAI semantic conventions' attributes that carry text the model read or wrote."""
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
        RELAY_ENV: relay_url.rstrip("/"),
    }


def gemini_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that turn on Gemini CLI's export, to the runner's relay (none
    without one: its spans would start traces of their own, and its logs and metrics
    would go to the pod's collector), with its usage on its spans and the prompt kept
    out unless the agent opted in."""
    relay = env.get(RELAY_ENV, "").strip()
    if not relay or not enabled(env):
        return {}
    return {
        "GEMINI_TELEMETRY_ENABLED": "true",
        "GEMINI_TELEMETRY_TARGET": "local",
        "GEMINI_TELEMETRY_OTLP_PROTOCOL": "http",
        "GEMINI_TELEMETRY_OTLP_ENDPOINT": relay,
        "GEMINI_TELEMETRY_TRACES_ENABLED": "true",
        "GEMINI_TELEMETRY_LOG_PROMPTS": "true" if content_opted_in(env) else "false",
    }


def redact(request: ExportTraceServiceRequest) -> int:
    """Remove :data:`CONTENT_ATTRIBUTES` from every span of ``request``; how many."""
    removed = 0
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                kept = [a for a in span.attributes if a.key not in CONTENT_ATTRIBUTES]
                if len(kept) != len(span.attributes):
                    removed += len(span.attributes) - len(kept)
                    del span.attributes[:]
                    span.attributes.extend(kept)
    return removed


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


_IDS = ("traceId", "spanId", "parentSpanId")


def from_json(body: bytes) -> ExportTraceServiceRequest:
    """An OTLP/HTTP JSON export request (Gemini CLI's) as OpenTelemetry's protocol type.

    OTLP's JSON writes trace and span ids in hex where protobuf's JSON mapping expects
    base64: they are turned over first.  Raises ValueError on what is not such a request."""
    data = json.loads(body)
    if not isinstance(data, dict):
        raise ValueError("not an OTLP export request")
    for resource in _items(data, "resourceSpans"):
        for scope in _items(resource, "scopeSpans"):
            for span in _items(scope, "spans"):
                _ids_to_base64(span)
                for link in _items(span, "links"):
                    _ids_to_base64(link)
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(data, request, ignore_unknown_fields=True)
    except json_format.ParseError as error:
        raise ValueError(str(error)) from error
    return request


def _items(parent: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """``parent[key]``, a list of objects (none if absent); ValueError if it is not."""
    found = parent.get(key) or []
    if not isinstance(found, list) or not all(isinstance(item, dict) for item in found):
        raise ValueError(f"{key} is not a list of objects")
    return found


def _ids_to_base64(item: dict[str, Any]) -> None:
    for key in _IDS:
        value = item.get(key)
        if isinstance(value, str) and value:
            item[key] = base64.b64encode(bytes.fromhex(value)).decode()
