"""The screenshot's conversion of the collector's spans to Zipkin's (``e2e/traceview.py``).

Aspects covered:
- each span keeps its trace, id, parent, name, service and times (µs, at least 1 µs
  long); a SERVER span stays one, an internal one has no kind;
- its attributes are tags, an error status the ``error`` tag, its events annotations.
"""

from __future__ import annotations

import json
from pathlib import Path

from e2e import traceview

TRACE, ROOT, CHILD = "ab" * 16, "01" * 8, "02" * 8
LINE = {
    "resourceSpans": [
        {
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "ac"}}]},
            "scopeSpans": [
                {
                    "spans": [
                        {
                            "traceId": TRACE,
                            "spanId": ROOT,
                            "name": "webhook issues.opened",
                            "kind": 2,
                            "startTimeUnixNano": "1000000000",
                            "endTimeUnixNano": "1000000500",
                        },
                        {
                            "traceId": TRACE,
                            "spanId": CHILD,
                            "parentSpanId": ROOT,
                            "name": "agentjob triage attempt 1",
                            "kind": 1,
                            "startTimeUnixNano": "1000000000",
                            "endTimeUnixNano": "3000000000",
                            "attributes": [
                                {"key": "agentchain.job.exit_code", "value": {"intValue": "1"}}
                            ],
                            "status": {"code": 2, "message": "retried: exited with code 1"},
                            "events": [{"name": "pod.running", "timeUnixNano": "2000000000"}],
                        },
                    ]
                }
            ],
        }
    ]
}


def test_spans_become_zipkins_with_their_tree_times_tags_and_events(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(LINE) + "\n")
    (root_service, root), (service, child) = traceview.read(path)
    assert root_service == service == "ac"
    top = traceview.zipkin_span(root_service, root)
    assert (top["traceId"], top["id"], top["kind"]) == (TRACE, ROOT, "SERVER")
    assert "parentId" not in top
    assert (top["timestamp"], top["duration"]) == (1_000_000, 1)  # Under 1 µs: 1 µs.
    under = traceview.zipkin_span(service, child)
    assert (under["parentId"], under["name"], under["duration"]) == (
        ROOT,
        "agentjob triage attempt 1",
        2_000_000,
    )
    assert "kind" not in under and under["localEndpoint"] == {"serviceName": "ac"}
    assert under["tags"] == {
        "agentchain.job.exit_code": "1",
        "error": "retried: exited with code 1",
    }
    assert under["annotations"] == [{"timestamp": 2_000_000, "value": "pod.running"}]
