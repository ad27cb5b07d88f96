"""One chain's trace in a real trace viewer, as a screenshot for docs/observability.md.

``python -m e2e.traceview SPANS_JSONL OUT_PNG`` reads an OpenTelemetry Collector's
file-exporter output (``e2e/collecting``), takes the trace with the most spans (or
``--trace``), loads it into Zipkin and photographs Zipkin's trace page with Debian's
chromium (``e2e/browsing``).  ``make trace-screenshot`` runs the three-agent chain of
``e2e/test_traces.py`` on the local control plane first and feeds it its collector's file.

Why Zipkin: Jaeger v2's binary builds from the Go module proxy and takes OTLP, but its
web UI is not in the Go module (a separate npm build, published to no registry), so the
binary serves a placeholder page.  Zipkin's server jar, with its UI, is on Maven Central:
``mvn dependency:get`` fetches it once into the local Maven repository.  Zipkin takes its
own JSON, so the spans are converted (ids, parents, times, kinds, attributes as tags, an
error status as the ``error`` tag, events as annotations): nothing is added or dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from e2e import browsing
from e2e.controlplane import processes

Obj = dict[str, Any]
ZIPKIN_VERSION = "3.5.1"
ZIPKIN_JAR = (
    Path.home()
    / f".m2/repository/io/zipkin/zipkin-server/{ZIPKIN_VERSION}"
    / f"zipkin-server-{ZIPKIN_VERSION}-exec.jar"
)
_KINDS = {2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}  # OTLP's; 1 is internal.


def _value(value: Obj) -> str:
    return str(next(iter(value.values()))) if value else ""


def read(path: Path) -> list[tuple[str, Obj]]:
    """Every span of the collector's file, with the service that sent it."""
    out: list[tuple[str, Obj]] = []
    for line in path.read_text().splitlines():
        for resource in json.loads(line).get("resourceSpans", []):
            said = {a["key"]: _value(a["value"]) for a in resource["resource"]["attributes"]}
            for scope in resource.get("scopeSpans", []):
                out += [(said.get("service.name", "unknown"), s) for s in scope["spans"]]
    return out


def zipkin_span(service: str, span: Obj) -> Obj:
    """``span`` (OTLP/JSON) as a Zipkin v2 span of ``service``."""
    start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
    tags = {a["key"]: _value(a["value"]) for a in span.get("attributes", [])}
    status = span.get("status") or {}
    if status.get("code") == 2:
        tags["error"] = status.get("message") or "true"
    out: Obj = {
        "traceId": span["traceId"],
        "id": span["spanId"],
        "name": span["name"],
        "timestamp": start // 1000,
        "duration": max((end - start) // 1000, 1),
        "localEndpoint": {"serviceName": service},
        "tags": tags,
        "annotations": [
            {"timestamp": int(e["timeUnixNano"]) // 1000, "value": e["name"]}
            for e in span.get("events", [])
        ],
    }
    if span.get("parentSpanId"):
        out["parentId"] = span["parentSpanId"]
    if span.get("kind") in _KINDS:
        out["kind"] = _KINDS[span["kind"]]
    return out


def _zipkin_jar() -> Path:
    if not ZIPKIN_JAR.exists():
        artifact = f"io.zipkin:zipkin-server:{ZIPKIN_VERSION}:jar:exec"
        subprocess.run(
            ["mvn", "-q", "dependency:get", f"-Dartifact={artifact}", "-Dtransitive=false"],
            check=True,
        )
    return ZIPKIN_JAR


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def photograph(
    spans: list[tuple[str, Obj]], trace: str, out: Path, workdir: Path, select: str = ""
) -> None:
    """Load ``trace``'s spans into a Zipkin of its own and screenshot its trace page,
    with span ``select`` (its name) selected when given."""
    port = processes.free_port()
    env = {**os.environ, "QUERY_PORT": str(port), "STORAGE_TYPE": "mem"}
    argv = ["java", "-Xmx512m", "-jar", str(_zipkin_jar())]
    log = (workdir / "zipkin.log").open("w")
    zipkin = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not _answers(f"{base}/health"):
            assert zipkin.poll() is None and time.monotonic() < deadline, "zipkin did not start"
            time.sleep(0.5)
        body = [zipkin_span(service, s) for service, s in spans if s["traceId"] == trace]
        service = body[0]["localEndpoint"]["serviceName"]
        request = urllib.request.Request(
            f"{base}/api/v2/spans",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        urllib.request.urlopen(request, timeout=30).close()
        with browsing.chromium(1400, 1060) as driver:
            driver.get(f"{base}/zipkin/traces/{trace}")
            browsing.wait(
                driver,
                lambda d: "agentjob" in d.find_element("tag name", "body").text,
                timeout=60,
                what="Zipkin's trace page",
            )
            if select:  # Its attributes in the side panel, instead of the root's.
                path = f"//*[text()='{service}: {select}']"
                driver.find_element("xpath", path).click()
            time.sleep(2)  # Its timeline is drawn after the names.
            shot = browsing.screenshot(driver, "trace-zipkin", max_height=1400)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, out)
    finally:
        zipkin.terminate()
        zipkin.wait(timeout=30)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("spans", type=Path, help="the collector's file-exporter output")
    parser.add_argument("out", type=Path, help="where the PNG goes")
    parser.add_argument("--trace", help="the trace id (default: the one with most spans)")
    parser.add_argument("--select", default="", help="the name of the span to select")
    args = parser.parse_args()
    spans = read(args.spans)
    counts: dict[str, int] = {}
    for _, span in spans:
        counts[span["traceId"]] = counts.get(span["traceId"], 0) + 1
    trace = args.trace or max(counts, key=lambda t: counts[t])
    photograph(spans, trace, args.out, args.spans.parent, args.select)
    print(f"{args.out}: trace {trace}, {counts[trace]} spans")


if __name__ == "__main__":
    main()
