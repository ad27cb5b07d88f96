"""Schemathesis against the job API: no schema-conformance failure, on a bounded budget.

The app runs as in ``test_api_fuzz.py`` (``webharness.served``: the real web app on the
session's API server and its own Redis database; the engine is not running), and
Schemathesis (its CLI, as CI would run it) reads the OpenAPI document the app serves
and sends what it derives from it: the documents' examples, its coverage phase
(boundary and just-invalid values of every schema) and a fixed-seed fuzzing phase, at
most :data:`MAX_EXAMPLES` cases per operation, within :data:`MAX_SECONDS`.

Aspects covered, every check Schemathesis has that judges one answer against the
document: no 5xx; a status, content type, headers and body the document lists for the
operation; a 405 for a method a path lacks, with ``Allow``; a missing required header
refused; a schema-invalid request refused (``"persistent": "yes"``); a schema-valid one
not refused as invalid (``"tokens": 1.0``).  Once with an admin token (every admin
operation) and once with a live job token (the operations only a job's own token may
use: usage, its anchor, its answer, its GitHub token).

Left out, each for a stated reason:
* ``positive_data_acceptance`` on the job-token pass's operations: a schema-valid usage
  report for a job the API server does not have is 404, which is the point;
* the stateful checks (``use_after_free``, ``ensure_resource_availability``) and the
  stateful phase: the document declares no links between operations;
* ``ignored_auth`` is kept: every operation but the webhook needs a token.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from agentchain.web import openapi
from e2e.controlplane.cluster import ClusterInfo
from e2e.webharness import ADMIN_TOKEN, agent_manifest, apply, kube, served

__all__ = ["kube"]

MAX_EXAMPLES = int(os.environ.get("AGENTCHAIN_SCHEMATHESIS_EXAMPLES", "10"))
MAX_SECONDS = 40  # Per pass; two passes stay within 90 s on a shared 2-core machine.
SEED = 27
JOB_TOKEN_PATHS = "^/api/(jobs/[^/]+/[^/]+/(usage|anchor|answer)|github/token)$"
STATELESS = "use_after_free,ensure_resource_availability"
# What Schemathesis accepts as an answer to a schema-valid request, by default.
ACCEPTED = ["2XX", "3XX", 401, 403, 404, 409, 429, "5XX"]
# What it accepts as refusing a schema-invalid request, by default, and 413.
REJECTED_ANSWER = [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429, "5XX"]


def _config(path: Path, namespace: str, job: str) -> Path:
    """Pin the namespace (and the job, for its token's operations) the app serves: the
    rest of every request is Schemathesis's to choose."""
    path.write_text(
        "[parameters]\n"
        f'"path.namespace" = "{namespace}"\n'
        f'"query.tenant" = "{namespace}"\n'
        f'"path.name" = "{job}"\n'
        # The list's cursor is opaque: any string fits its schema, but only a "next" the
        # API gave back is one (422 otherwise), which no schema can say.
        "[[operations]]\n"
        'include-path = "/api/jobs"\n'
        'include-method = "GET"\n'
        "[operations.checks.positive_data_acceptance]\n"
        f"expected-statuses = {[*ACCEPTED, 422]}\n"
        # An answer over its maxLength is, escaped as JSON, past the body cap: refused
        # with the documented 413 before it is parsed, which is a rejection too.
        "[[operations]]\n"
        'include-path = "/api/jobs/{namespace}/{name}/answer"\n'
        "[operations.checks.negative_data_rejection]\n"
        f"expected-statuses = {REJECTED_ANSWER}\n"
    )
    return path


def _failures(out: str) -> str:
    """Schemathesis's report from its first failure on (the run's progress is noise)."""
    start = out.find("FAILURES")
    return out[start if start >= 0 else 0 :][-20000:]


async def _run(config: Path, url: str, token: str, *extra: str) -> tuple[int, str]:
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(config),
        "run",
        url,
        "--header",
        f"Authorization: Bearer {token}",
        "--checks",
        "all",
        "--exclude-checks",
        STATELESS,
        "--phases",
        "examples,coverage,fuzzing",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        "--generation-database",
        "none",
        "--max-time",
        str(MAX_SECONDS),
        "--workers",
        "2",
        "--no-color",
        "--request-timeout",
        "20",
        "--warnings",
        "off",
        *extra,
    ]
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), MAX_SECONDS + 60)
    return proc.returncode or 0, out.decode("utf-8", "replace")


async def test_schemathesis_finds_no_schema_conformance_failure(
    kube: ClusterInfo, namespace: str, tmp_path: Path
) -> None:
    apply(kube, namespace, agent_manifest("ai-a"))
    config = _config(tmp_path / "schemathesis.toml", namespace, "job-1")
    async with served(kube, namespace, dispatch=False, own_redis=True) as (client, rt):
        url = str(client.make_url(openapi.PATH))
        code, out = await _run(config, url, ADMIN_TOKEN, "--exclude-path-regex", JOB_TOKEN_PATHS)
        (tmp_path / "admin.txt").write_text(out)
        assert code == 0, _failures(out)
        token = await rt.tokens.issue(namespace, "job-1", "uid-job-1", "chain-of-job-1", 600)
        code, out = await _run(
            config,
            url,
            token,
            "--include-path-regex",
            JOB_TOKEN_PATHS,
            "--exclude-checks",
            f"{STATELESS},positive_data_acceptance",
        )
        (tmp_path / "job.txt").write_text(out)
        assert code == 0, _failures(out)
