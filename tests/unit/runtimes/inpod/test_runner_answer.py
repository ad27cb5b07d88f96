"""The runner hands its final answer over to the job API (``runtimes/inpod/runner.py``), run as
``python -m agentchain agent run`` against the real job API app on a real Redis.

Aspects covered:
- on success the answer is stored for the job's attempt through its own token, and is
  also printed on stdout; the transcript (stderr) is not part of it;
- with the API unreachable the runner still prints the answer and exits 0, after a
  bounded number of tries;
- a long answer is sent as its end, with ``truncated`` and the whole size, within the
  job API's body cap, whatever it holds.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

from agentchain.core.runtime import Runtime
from agentchain.runtimes.inpod import runner
from agentchain.store.answers import ANSWER_MAX_BYTES, AnswerStore
from tests.unit.web.conftest import Client
from tests.unit.web.jobapi.test_reads_http import job_token

RUNNER = [sys.executable, "-m", "agentchain", "agent", "run"]
ANSWER = "Fixed it: the off-by-one was in the loop."


def fake_claude(tmp_path: Path, answer: str) -> Path:
    """A CLI that prints a transcript line on stderr and Claude Code's result on stdout."""
    result = {"type": "result", "subtype": "success", "result": answer, "num_turns": 1}
    cli = tmp_path / "claude"
    cli.write_text(
        f"#!/bin/sh\ncat >/dev/null\necho 'thinking out loud' >&2\necho '{json.dumps(result)}'\n"
    )
    cli.chmod(0o755)
    return cli


async def run(env: dict[str, str]) -> tuple[int, str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "AGENTCHAIN_"))}
    child = await asyncio.create_subprocess_exec(
        *RUNNER,
        env={**base, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(child.communicate(), 120)
    return child.returncode or 0, out.decode(), err.decode()


async def test_the_runner_hands_its_answer_over(
    client: Client, runtime: Runtime, tmp_path: Path
) -> None:
    token = (await job_token(runtime))["Authorization"].removeprefix("Bearer ")
    env = {
        "AGENT_PROMPT": "Fix it.",
        "AGENTCHAIN_RUNTIME": "claude-code",
        "AGENTCHAIN_AGENT_CLI": str(fake_claude(tmp_path, ANSWER)),
        "AGENT_API_URL": str(client.make_url("")),
        "AGENT_TOKEN": token,
        "AGENT_NAMESPACE": "team-a",
        "AGENT_JOB": "job-1",
        "AGENT_ATTEMPT": "2",
    }
    code, out, err = await run(env)
    assert (code, out) == (0, ANSWER + "\n"), err
    assert "[runner] answer handed over" in err
    stored = await AnswerStore(runtime.redis).get("team-a", "job-1", "uid-job-1", 2)
    assert stored is not None and stored.text == ANSWER
    assert "thinking out loud" not in stored.text


async def test_without_the_api_the_answer_is_still_printed(tmp_path: Path) -> None:
    env = {
        "AGENT_PROMPT": "Fix it.",
        "AGENTCHAIN_RUNTIME": "claude-code",
        "AGENTCHAIN_AGENT_CLI": str(fake_claude(tmp_path, ANSWER)),
        "AGENT_API_URL": "http://127.0.0.1:9",  # Nothing listens on the discard port.
        "AGENT_TOKEN": "t",
        "AGENT_NAMESPACE": "team-a",
        "AGENT_JOB": "job-1",
    }
    started = time.monotonic()
    code, out, err = await run(env)
    assert (code, out) == (0, ANSWER + "\n"), err
    assert f"[runner] answer not handed over after {runner.API_ATTEMPTS} attempts" in err
    assert time.monotonic() - started < 60


def test_a_long_answer_is_sent_as_its_end_within_the_body_cap() -> None:
    answer = "head " + "\x01" * (2 * ANSWER_MAX_BYTES) + " the conclusion"
    body = runner.answer_body(answer, 3)
    assert len(body) <= runner.API_MAX_BODY_BYTES
    sent = json.loads(body)
    assert sent["truncated"] is True and sent["size"] == len(answer.encode())
    assert sent["answer"].endswith(" the conclusion") and sent["attempt"] == 3
    short = json.loads(runner.answer_body("done", 1))
    assert short == {"answer": "done", "attempt": 1}


def test_the_runners_cap_is_the_apis() -> None:
    assert runner.ANSWER_MAX_BYTES == ANSWER_MAX_BYTES
