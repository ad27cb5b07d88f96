"""A real OpenTelemetry Collector for the tests: OTLP/HTTP in, the file exporter out.

The collector is the core distribution's OTLP receiver and file exporter, built from the
Go module proxy (``e2e/controlplane/build-binaries.sh otelcol``).  ``Collector(workdir)``
starts one on a free port of 127.0.0.1, logging under ``workdir/logs``; ``spans()``
reads back every span it wrote (``e2e/tracetree``).
"""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from e2e import tracetree
from e2e.controlplane import processes

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parent.parent


class Collector:
    def __init__(self, workdir: Path) -> None:
        self.port = processes.free_port()
        self.dir = workdir / "otelcol"
        self.dir.mkdir(exist_ok=True)
        self.output = self.dir / "spans.jsonl"
        config = self.dir / "config.yaml"
        config.write_text(
            "receivers:\n  otlp:\n    protocols:\n      http:\n"
            f"        endpoint: 127.0.0.1:{self.port}\n"
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
        return f"http://127.0.0.1:{self.port}"

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


def attrs(span: Obj) -> dict[str, Any]:
    """A span's attributes as a plain table (the file exporter's OTLP/JSON values)."""
    out: dict[str, Any] = {}
    for item in span.get("attributes", []):
        value = item["value"]
        out[item["key"]] = next(iter(value.values())) if value else None
    return out
