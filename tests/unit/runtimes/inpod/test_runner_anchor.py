"""Seed 004's post-compaction recovery point for Claude Code (``runtimes/inpod/runner.py``):
``agentchain agent anchor`` and the hook the runner registers for it, run as
subprocesses against the real job API app on a real Redis.

Aspects covered:
- ``agentchain agent anchor`` prints the job's anchor, read with its own token, as a
  ``SessionStart`` hook's ``additionalContext`` (a fenced JSON block); nothing, and exit
  0, when the job wrote none or the API is unreachable (the hook never stops the agent);
- the runner gives Claude Code a ``--settings`` file whose ``SessionStart`` hook, matcher
  ``compact``, runs that command: a stand-in CLI that runs the hook as Claude Code does
  after compacting gets the anchor the job wrote; without the job's variables there is
  no hook.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from agentchain.core.runtime import Runtime
from agentchain.runtimes.rules import clis
from tests.unit.web.conftest import Client
from tests.unit.web.jobapi.test_reads_http import job_token

ANCHOR = {"task": "fix the login redirect", "status": "tests written", "files": ["app/auth.py"]}


async def run(*argv: str, env: dict[str, str]) -> tuple[int, str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "AGENTCHAIN_"))}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentchain",
        "agent",
        *argv,
        env={**base, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(child.communicate(), 120)
    return child.returncode or 0, out.decode(), err.decode()


async def job_env(
    client: Client, runtime: Runtime, anchor: dict[str, Any] | None
) -> dict[str, str]:
    """The job's variables; with ``anchor``, the job wrote it first (its own token)."""
    auth = await job_token(runtime)
    if anchor is not None:
        put = await client.put("/api/jobs/team-a/job-1/anchor", json=anchor, headers=auth)
        assert put.status == 200, await put.text()
    return {
        "AGENT_API_URL": str(client.make_url("")),
        "AGENT_TOKEN": auth["Authorization"].removeprefix("Bearer "),
        "AGENT_NAMESPACE": "team-a",
        "AGENT_JOB": "job-1",
    }


def context_of(stdout: str) -> str:
    output = json.loads(stdout)["hookSpecificOutput"]
    assert output["hookEventName"] == "SessionStart"
    context: str = output["additionalContext"]
    return context


async def test_the_anchor_command_prints_the_jobs_anchor_as_hook_context(
    client: Client, runtime: Runtime
) -> None:
    code, out, err = await run("anchor", env=await job_env(client, runtime, ANCHOR))
    assert code == 0, err
    context = context_of(out)
    assert context.startswith(clis.ANCHOR_RECOVERY_HEADING)
    fenced = context.split("```json\n", 1)[1].rsplit("\n```", 1)[0]
    assert json.loads(fenced) == ANCHOR


async def test_no_anchor_or_no_api_prints_nothing_and_succeeds(
    client: Client, runtime: Runtime
) -> None:
    code, out, err = await run("anchor", env=await job_env(client, runtime, None))
    assert (code, out, err) == (0, "", "")
    unreachable = {**await job_env(client, runtime, None), "AGENT_API_URL": "http://127.0.0.1:9"}
    code, out, err = await run("anchor", env=unreachable)
    assert (code, out) == (0, "") and "[anchor] not read:" in err


def compacting_claude(tmp_path: Path) -> Path:
    """A stand-in for Claude Code that, like it after a compaction, runs the command of
    each ``SessionStart`` hook matching ``compact`` from its ``--settings`` file, and
    answers with what the hooks printed."""
    script = tmp_path / "claude.py"
    script.write_text(
        "import json, subprocess, sys\n"
        "sys.stdin.read()\n"
        "args = sys.argv[1:]\n"
        "said = []\n"
        "if '--settings' in args:\n"
        "    settings = json.load(open(args[args.index('--settings') + 1]))\n"
        "    for group in settings['hooks']['SessionStart']:\n"
        "        if group['matcher'] == 'compact':\n"
        "            for hook in group['hooks']:\n"
        "                run = subprocess.run(hook['command'], shell=True, capture_output=True,"
        " text=True)\n"
        "                said.append(run.stdout)\n"
        "result = {'type': 'result', 'subtype': 'success', 'num_turns': 1,"
        " 'result': json.dumps(said)}\n"
        "print(json.dumps(result))\n"
    )
    cli = tmp_path / "claude"
    cli.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    cli.chmod(0o755)
    return cli


async def test_the_runner_registers_the_compaction_hook_with_claude_code(
    client: Client, runtime: Runtime, tmp_path: Path
) -> None:
    env = {
        **await job_env(client, runtime, ANCHOR),
        "AGENT_PROMPT": "Fix it.",
        "AGENTCHAIN_RUNTIME": "claude-code",
        "AGENTCHAIN_AGENT_CLI": str(compacting_claude(tmp_path)),
    }
    code, out, err = await run("run", env=env)
    assert code == 0, err
    [printed] = json.loads(out)
    assert json.loads(context_of(printed).split("```json\n", 1)[1].rsplit("\n```", 1)[0]) == (
        ANCHOR
    )
    # Without the job's variables there is no anchor to read, and no hook.
    alone = {k: v for k, v in env.items() if k != "AGENT_TOKEN"}
    code, out, err = await run("run", env=alone)
    assert (code, json.loads(out)) == (0, []), err
