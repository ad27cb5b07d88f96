"""A real CLI's own spans, from its pod on the real node, under its job's span.

``e2e/test_cli_traces.py`` runs the CLIs as host processes with the variables a pod
would get; this runs Claude Code in its reference image (``images/agent/Dockerfile``)
on the real node (``e2e/runtime_stage.py``, ``traced=True``), with the operator
exporting to a real OpenTelemetry Collector on the node's bridge address: the pod gets
``TRACEPARENT`` and that endpoint from the operator, and the runner in the image turns
on the CLI's own export.

Marked ``realnode`` (root, buildah, the real node): ``make realnode`` runs it.

Aspects covered:
- the chain is one trace, a whole tree: the operator's spans and the CLI's;
- the CLI's top span (``claude_code.interaction``) hangs under the job's span, and its
  model request (``claude_code.llm_request``) under that job's span too;
- the job's span carries the token split its runner reported
  (``gen_ai.usage.input_tokens`` / ``output_tokens``).
"""

from __future__ import annotations

import pytest

from agentchain.traces.rules import spans
from e2e import collecting, operating, runtime_stage
from e2e.collecting import attrs
from e2e.controlplane.cluster import existing_kubeconfig
from e2e.models import text

pytestmark = pytest.mark.realnode


def test_a_claude_pods_own_spans_nest_under_its_jobs_span() -> None:
    if existing_kubeconfig() is not None:
        pytest.skip("the real node is part of the local cluster only")
    with runtime_stage.stage(("claude-code",), traced=True) as stage:
        collector = stage.collector
        assert collector is not None
        stage.agent("traced-claude", "claude-code")
        stage.standin.script(text("Forty-two.", input_tokens=300, output_tokens=40))
        stage.start_job("traced-claude-1", "traced-claude")
        status = stage.ended("traced-claude-1")
        assert status["phase"] == "Succeeded", (status, stage.logs("traced-claude-1"))
        chain_id = str(status["chainId"])
        trace = f"{spans.trace_id(chain_id):032x}"

        def arrived() -> bool:
            names = {s["name"] for s in collector.spans() if s["traceId"] == trace}
            return {"agentjob traced-claude", "claude_code.interaction"} <= names

        operating.wait_until(arrived, timeout=60, what="the job's and the CLI's spans")
        received = collector.trace_of(chain_id, 8)

    collecting.assert_one_tree(received)
    job = f"{spans.job_span_id(runtime_stage.NAMESPACE, 'traced-claude-1'):016x}"
    by_id = {s["spanId"]: s for s in received}
    (mine,) = [s for s in received if s["name"] == "agentjob traced-claude"]
    assert mine["spanId"] == job
    said = attrs(mine)
    assert (int(said["gen_ai.usage.input_tokens"]), int(said["gen_ai.usage.output_tokens"])) == (
        300,
        40,
    )
    (cli,) = [s for s in received if s["name"] == "claude_code.interaction"]
    assert cli["parentSpanId"] == job, cli
    requests = [s for s in received if s["name"] == "claude_code.llm_request"]
    assert requests, [s["name"] for s in received]
    for request in requests:
        parent = request.get("parentSpanId")
        while parent and parent != job:
            parent = by_id[parent].get("parentSpanId")
        assert parent == job, request
