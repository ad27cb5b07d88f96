"""Render an OpenTelemetry Collector's file-exporter output as one tree per trace.

``python -m e2e.tracetree spans.jsonl`` prints, per trace, every span under its parent
with its offset from the trace's start and its duration, and the attributes that say
what happened (agent, phase, reason, exit code, decision, caller).  A span whose parent
never arrived is shown at the top level, marked ``(orphan)``, so a broken trace is
visible at a glance.
``e2e/test_traces.py`` keeps the tree it checked in its logs; docs/observability.md
shows one.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Obj = dict[str, Any]
SHOWN = (
    "gen_ai.agent.name",
    "agentchain.job.phase",
    "agentchain.job.reason",
    "agentchain.job.exit_code",
    "agentchain.decision.action",
    "agentchain.decision.next_agent",
    "agentchain.publish.outcome",
    "agentchain.caller",
    "github.event",
)


def read(path: Path) -> list[Obj]:
    """Every span the collector wrote to ``path`` (a line it is still writing, with no
    newline yet, is not read: it is read whole next time)."""
    spans: list[Obj] = []
    text = path.read_text()
    for line in text[: text.rfind("\n") + 1].splitlines():
        for resource in json.loads(line).get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                spans.extend(scope.get("spans", []))
    return spans


def _attrs(span: Obj) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in span.get("attributes", []):
        value = item["value"]
        out[item["key"]] = next(iter(value.values())) if value else None
    return out


def render(spans: Iterable[Obj]) -> str:
    """The spans as text, one tree per trace, children by start time."""
    by_trace: dict[str, list[Obj]] = defaultdict(list)
    for span in spans:
        by_trace[span["traceId"]].append(span)
    lines: list[str] = []
    for trace, members in by_trace.items():
        ids = {s["spanId"] for s in members}
        children: dict[str | None, list[Obj]] = defaultdict(list)
        for span in members:
            parent = span.get("parentSpanId") or None
            children[parent if parent in ids else None].append(span)
        start = min(int(s["startTimeUnixNano"]) for s in members)
        lines.append(f"trace {trace}")
        _walk(children, None, 1, start, lines)
    return "\n".join(lines)


def _started(span: Obj) -> int:
    return int(span["startTimeUnixNano"])


def _walk(
    children: dict[str | None, list[Obj]],
    parent: str | None,
    depth: int,
    start: int,
    out: list[str],
) -> None:
    for span in sorted(children[parent], key=_started):
        begin = (_started(span) - start) / 1e9
        took = (int(span["endTimeUnixNano"]) - _started(span)) / 1e9
        attrs = _attrs(span)
        said = " ".join(f"{k.rsplit('.', 1)[-1]}={attrs[k]}" for k in SHOWN if k in attrs)
        orphan = " (orphan)" if parent is None and span.get("parentSpanId") else ""
        text = f"{'  ' * depth}{span['name']}  +{begin:.2f}s {took:.2f}s"
        out.append(text + (f"  {said}" if said else "") + orphan)
        _walk(children, span["spanId"], depth + 1, start, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="the collector's file exporter output")
    print(render(read(parser.parse_args().path)))


if __name__ == "__main__":
    main()
