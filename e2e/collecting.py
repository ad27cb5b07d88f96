"""A real OpenTelemetry Collector for the tests: OTLP/HTTP in, the file exporter out.

The collector is the core distribution's OTLP receiver and file exporter, built from the
Go module proxy (``e2e/controlplane/build-binaries.sh otelcol``).  ``Collector(workdir)``
starts one on a free port of 127.0.0.1 (or ``host``: the real node's bridge address, for
pods to reach), logging under ``workdir/logs``; ``spans()``
reads back every span it wrote (``e2e/tracetree``), and ``tree(chain_id, count)``
waits for a chain's trace and checks that it is one whole tree of ``count`` spans.
"""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from e2e import operating, tracetree
from e2e.controlplane import processes

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parent.parent


class Collector:
    def __init__(self, workdir: Path, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = processes.free_port()
        self.dir = workdir / "otelcol"
        self.dir.mkdir(exist_ok=True)
        self.output = self.dir / "spans.jsonl"
        config = self.dir / "config.yaml"
        config.write_text(
            "receivers:\n  otlp:\n    protocols:\n      http:\n"
            f"        endpoint: {host}:{self.port}\n"
            f"exporters:\n  file:\n    path: {self.output}\n"
            "service:\n  telemetry:\n    metrics:\n      level: none\n"
            "  pipelines:\n    traces:\n      receivers: [otlp]\n      exporters: [file]\n"
        )
        built = subprocess.run(
            ["bash", str(REPO / "e2e/controlplane/build-binaries.sh"), "otelcol"],
            check=True,
            capture_output=True,
            text=True,
        )
        binary = Path(built.stdout.strip().splitlines()[-1]) / "otelcol"
        argv = [str(binary), "--config", str(config)]
        self.process = processes.start("otelcol", argv, workdir)
        processes.wait_for(self._up, what="the collector", timeout=30, watch=[self.process])

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _up(self) -> bool:
        try:
            urllib.request.urlopen(f"{self.endpoint}/v1/traces", timeout=1)
        except urllib.error.HTTPError:
            return True  # It answers (405 to a GET): the receiver is listening.
        except OSError:
            return False
        return True

    def spans(self) -> list[Obj]:
        """Every span the collector wrote."""
        return tracetree.read(self.output) if self.output.exists() else []

    def trace_of(self, chain_id: str, count: int, timeout: float = 60) -> list[Obj]:
        """The spans of chain ``chain_id``'s trace once ``count`` have arrived, and a
        moment more (so that a duplicate or a stray sent late is caught too)."""

        def trace_ids() -> set[str]:
            return {
                s["traceId"]
                for s in self.spans()
                if attrs(s).get("agentchain.chain.id") == chain_id
            }

        def arrived() -> bool:
            ids = trace_ids()
            return len(ids) == 1 and sum(s["traceId"] in ids for s in self.spans()) >= count

        operating.wait_until(arrived, timeout=timeout, what=f"{count} spans of chain {chain_id}")
        time.sleep(3)
        (trace,) = trace_ids()
        return [s for s in self.spans() if s["traceId"] == trace]

    def tree(self, chain_id: str, count: int, timeout: float = 60) -> tuple[list[Obj], Obj]:
        """Chain ``chain_id``'s trace, checked to be exactly ``count`` spans in one tree
        (``assert_one_tree``), and its root."""
        spans = self.trace_of(chain_id, count, timeout)
        root = assert_one_tree(spans)
        assert len(spans) == count, f"{len(spans)} spans, not {count}:\n{tracetree.render(spans)}"
        return spans, root


def assert_one_tree(spans: list[Obj]) -> Obj:
    """No span twice, exactly one root, every parent present; the root."""
    tree = tracetree.render(spans)
    ids = [s["spanId"] for s in spans]
    assert len(ids) == len(set(ids)), f"a span was exported twice:\n{tree}"
    roots = [s for s in spans if not s.get("parentSpanId")]
    assert len(roots) == 1, f"not one root:\n{tree}"
    orphans = [s["name"] for s in spans if s.get("parentSpanId") and s["parentSpanId"] not in ids]
    assert not orphans, f"spans whose parent was never received:\n{tree}"
    print(tree)  # Kept in the test's captured output.
    return roots[0]


def attrs(span: Obj) -> dict[str, Any]:
    """A span's attributes as a plain table (the file exporter's OTLP/JSON values)."""
    out: dict[str, Any] = {}
    for item in span.get("attributes", []):
        value = item["value"]
        out[item["key"]] = next(iter(value.values())) if value else None
    return out
