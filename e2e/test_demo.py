"""README's demo command, run as a newcomer runs it (issues 15, 17, 19).

``make demo`` is ``e2e/setup.sh`` (which CI has run already) then ``python -m e2e.demo``;
this runs the latter as its own process, with its own cluster, and reads what it prints.

Aspects covered:
* the signed delivery is accepted and seed 003's three-agent chain completes;
* the comment the chain kept on the issue is printed, one comment, from the GitHub
  stand-in's record, holding the chain's steps;
* the dashboard opens the finished chain (logged in with the admin token it prints),
  and the URL of the chain's page and the token are printed;
* Ctrl-C ends it cleanly (status 0).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO_TIMEOUT_SECONDS = 420.0
END = "Press Ctrl-C to stop everything."


def _run_until_ready(out: Path) -> tuple[subprocess.Popen[bytes], str]:
    with out.open("wb") as fh:
        process = subprocess.Popen(
            [sys.executable, "-m", "e2e.demo"],
            cwd=ROOT,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + DEMO_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        text = out.read_text(errors="replace")
        if END in text:
            return process, text
        if process.poll() is not None:
            raise AssertionError(f"the demo exited {process.returncode}:\n{text[-4000:]}")
        time.sleep(1)
    process.send_signal(signal.SIGINT)
    raise AssertionError(f"the demo printed no end in {DEMO_TIMEOUT_SECONDS}s:\n{text[-4000:]}")


@pytest.mark.timeout(600)
def test_the_demo_runs_a_chain_to_its_comment_and_dashboard(tmp_path: Path) -> None:
    process, text = _run_until_ready(tmp_path / "stdout")
    try:
        assert "webhook answered 202" in text, text[-4000:]
        assert "the chain is complete" in text, text[-4000:]
        assert "the comment the chain wrote on acme/webapp#1" in text, text[-4000:]
        assert "1 comment(s)" in text, text[-4000:]
        assert "agentchain:chain=demo/" in text, "the printed comment is not the chain's"
        for agent in ("triage", "developer", "reviewer"):
            assert agent in text.split("the comment the chain wrote", 1)[1], agent
        assert "the dashboard shows the finished chain" in text, text[-4000:]
        assert re.search(r"the chain: http://127\.0\.0\.1:\d+/ui/chains/demo/\S+", text), text
        assert re.search(r"log in with the admin token \S+", text), text
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C: the demo's normal end.
        try:
            status = process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            raise
    assert status == 0, (tmp_path / "stdout").read_text(errors="replace")[-4000:]
