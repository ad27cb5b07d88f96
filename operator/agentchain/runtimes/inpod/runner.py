"""``agentchain agent run``: the in-pod runner between the pod and an agent CLI.

It reads the environment every agent pod gets (SPEC §1: ``AGENT_PROMPT_FILE`` /
``AGENT_PROMPT``, ``AGENT_MODEL``, ``AGENT_EFFORT``, the job API's ``AGENT_API_URL``,
``AGENT_TOKEN``, ``AGENT_NAMESPACE``, ``AGENT_JOB``) and the runner's own settings
(``AGENTCHAIN_RUNTIME``, ``AGENTCHAIN_MAX_TURNS``, ... in ``clis.py``), runs the
CLI non-interactively with the prompt on stdin, and:

- streams the CLI's transcript to stderr, one line an event (the pod's log), with the
  CLI's own stderr passed through line by line;
- hands the final answer over to the job API's answer route with the job's token
  (bounded tries), which makes it the job's output without a ``pods/log`` read, and
  prints it on stdout too, at the end, so that the log still has it if that failed;
- reports the run's tokens (and their input/output split, where the CLI gives one) and
  cost to the job API's usage route with the job's token (no agent-side code), also
  when the run failed after using some;
- exits with a code of ``runnerexits`` and, on failure, a one-line message as the last
  line of stderr (bad key, rate limit, provider failure, turn limit, ...);
- when the pod traces, turns on the CLI's own span export under the job's span
  (``clitelemetry``), through a local relay (``otlprelay``) for a CLI that would start
  traces of its own;
- gives Claude Code seed 004's post-compaction recovery point: a ``SessionStart`` hook
  (matcher ``compact``) running ``agentchain agent anchor``, which prints the job's
  anchor, read with its token, as context for the model.

The CLI's words are untrusted: they are logged as one bounded line per event and never
interpreted beyond the JSON fields read in ``clis.py``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import IO, Any

from agentchain.core.rules import runnerexits as exits
from agentchain.demo_agent import read_prompt
from agentchain.runtimes.inpod import otlprelay
from agentchain.runtimes.rules import clis, clitelemetry

API_ATTEMPTS = 3
"""Tries of a job API call (usage, answer): with 1 s and 2 s between them and at most
``API_TIMEOUT_SECONDS`` each, a runner never waits more than 33 s on the API."""
API_TIMEOUT_SECONDS = 10.0
ANSWER_MAX_BYTES = 512 * 1024
"""The job API's limit, ``store/answers.ANSWER_MAX_BYTES`` (a test holds them equal):
repeated so that the runner, in an agent's image, does not import the store."""
API_MAX_BODY_BYTES = 1024 * 1024
STDERR_TAIL_LINES = 20


def add_parser(sub: Any) -> None:
    """Register ``agent run`` on the CLI's subparsers."""
    group = sub.add_parser("agent", help="run an agent CLI in a pod (the in-pod runner)")
    commands = group.add_subparsers(dest="agent_command", required=True)
    run = commands.add_parser(
        "run", help="run the agent CLI on the job's prompt; the final answer on stdout"
    )
    run.add_argument(
        "--runtime",
        choices=clis.RUNTIMES,
        default=None,
        help=f"the agent CLI (default: ${clis.RUNTIME_ENV})",
    )
    commands.add_parser(
        "anchor",
        help="print the job's anchor as a Claude Code SessionStart hook's context "
        "(the runner's post-compaction hook)",
    )


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


JOB_ENV = ("AGENT_API_URL", "AGENT_TOKEN", "AGENT_NAMESPACE", "AGENT_JOB")


def anchor_command() -> list[str]:
    """How Claude Code's compaction hook runs ``agentchain agent anchor``: with this
    runner's own interpreter and package, whatever the image's ``PATH`` holds."""
    return [sys.executable, "-m", "agentchain", "agent", "anchor"]


def main(args: argparse.Namespace) -> int:
    if getattr(args, "agent_command", "run") == "anchor":
        return print_anchor(dict(os.environ))
    env = dict(os.environ)
    try:
        settings = clis.settings_from(env, read_prompt(env), args.runtime)
    except (clis.SettingsError, OSError) as error:
        return _fail(exits.EXIT_RUNNER_MISCONFIGURED, str(error))
    with tempfile.TemporaryDirectory(prefix="agentchain-runner-") as scratch:
        # Seed 004's recovery point, where the job's anchor can be read back.
        hook = anchor_command() if all(env.get(name) for name in JOB_ENV) else []
        # A CLI that starts traces of its own exports through a relay that adopts its
        # spans into the job's trace (runtimes/rules/clitelemetry).
        relay = _relay(settings.runtime, env)
        cli_env = clitelemetry.relayed_env(env, relay.url) if relay else env
        command = clis.command_for(settings, cli_env, scratch, hook)
        for warning in command.warnings:
            _say(f"[runner] warning: {warning}")
        try:
            for path, content in command.files.items():
                # Owner-only: an MCP server's variables may hold secrets.
                os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as file:
                    file.write(content)
            result = _run(settings, command, cli_env)
        except OSError as error:
            return _fail(exits.EXIT_RUNNER_MISCONFIGURED, f"cannot start {settings.cli}: {error}")
        finally:
            if relay is not None:
                relay.stop()  # Whatever the CLI exported was forwarded before it ended.
    _report_usage(env, result)
    _say(
        f"[runner] {settings.runtime}: {result.turns} turns, {result.tokens} tokens, "
        f"cost {result.cost:g} USD, exit {result.exit_code}"
    )
    if result.exit_code != exits.EXIT_OK:
        _say(result.message)
        return result.exit_code
    hand_over(env, result.answer)
    sys.stdout.write(result.answer if result.answer.endswith("\n") else result.answer + "\n")
    sys.stdout.flush()
    return exits.EXIT_OK


def _relay(runtime: str, env: Mapping[str, str]) -> otlprelay.Relay | None:
    """The trace relay for ``runtime``'s run, if its spans need one. Tracing never fails
    a run: a relay that cannot start leaves the CLI exporting straight to the collector."""
    if not clitelemetry.relayed(runtime, env):
        return None
    try:
        return otlprelay.Relay(env)
    except (OSError, ValueError) as error:
        _say(f"[runner] warning: no trace relay ({clis.one_line(str(error), 200)})")
        return None


def _fail(code: int, detail: str) -> int:
    reason = exits.reason_of_exit(code)
    _say(clis.one_line(f"{reason.summary if reason else 'failed'}: {detail}"))
    return code


def _feed_prompt(stdin: IO[str], prompt: str) -> None:
    try:
        stdin.write(prompt)
        stdin.close()
    except (BrokenPipeError, OSError):
        pass  # The CLI ended before reading it all; its exit says why.


def _pass_stderr(stderr: IO[str], tail: collections.deque[str]) -> None:
    """The CLI's own stderr into the pod's log, each line flattened and bounded."""
    for line in stderr:
        tail.append(line)
        flat = clis.one_line(line, clis.LOG_LINE_MAX_CHARS)
        if flat:
            _say(flat)


def _run(settings: clis.Settings, command: clis.Command, env: Mapping[str, str]) -> clis.Outcome:
    """Run the CLI to its end, logging its events; how it ended."""
    child = subprocess.Popen(
        command.argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**env, **command.env},
        text=True,
        encoding="utf-8",
        errors="replace",
        bufsize=1,
    )
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    # A stop of the pod (SIGTERM) is the CLI's to handle: it ends, and so does the runner.
    previous = signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
    threads = [
        threading.Thread(target=_feed_prompt, args=(child.stdin, settings.prompt), daemon=True),
        threading.Thread(target=_pass_stderr, args=(child.stderr, tail), daemon=True),
    ]
    for thread in threads:
        thread.start()
    transcript = clis.Transcript(settings.runtime, max_turns=settings.max_turns)
    try:
        for line in child.stdout:
            event = transcript.feed(line)
            logged = (
                clis.log_line(settings.runtime, event)
                if event is not None
                else clis.one_line(line, clis.LOG_LINE_MAX_CHARS)
            )
            if logged:
                _say(logged)
        returncode = child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    for thread in threads:
        thread.join(timeout=5)
    return clis.outcome(transcript, returncode, "".join(tail))


def answer_body(answer: str, attempt: int) -> bytes:
    """The answer route's body: the answer, or its end that fits when it is longer."""
    data = answer.encode("utf-8", errors="replace")
    limit = ANSWER_MAX_BYTES
    while True:
        tail = data[-limit:].decode("utf-8", errors="ignore") if len(data) > limit else answer
        sent = len(tail.encode("utf-8"))
        body: dict[str, Any] = {"answer": tail, "attempt": attempt}
        if sent < len(data):
            body.update(truncated=True, size=len(data))
        encoded = json.dumps(body, ensure_ascii=False).encode("utf-8")
        # Escapes (control characters: six bytes each) can grow it past the body cap.
        if len(encoded) <= API_MAX_BODY_BYTES or limit < 1024:
            return encoded
        limit //= 2


def _api_call(
    env: Mapping[str, str], method: str, route: str, body: bytes, failed: str
) -> str | None:
    """Send ``body`` to the job's own ``route`` with its token, with bounded tries:
    what the API answered, or None after saying why it ``failed``."""
    names = ("AGENT_API_URL", "AGENT_TOKEN", "AGENT_NAMESPACE", "AGENT_JOB")
    missing = [name for name in names if not env.get(name)]
    if missing:
        _say(f"[runner] {failed}: {', '.join(missing)} unset")
        return None
    quote = urllib.parse.quote
    url = (
        f"{env['AGENT_API_URL'].rstrip('/')}/api/jobs/{quote(env['AGENT_NAMESPACE'], '')}"
        f"/{quote(env['AGENT_JOB'], '')}/{route}"
    )
    headers = {"Authorization": f"Bearer {env['AGENT_TOKEN']}", "Content-Type": "application/json"}
    problem = ""
    for attempt in range(1, API_ATTEMPTS + 1):
        request = urllib.request.Request(url, data=body, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=API_TIMEOUT_SECONDS) as answer:
                return clis.one_line(answer.read().decode("utf-8", errors="replace"))
        except urllib.error.HTTPError as error:
            if error.code < 500:  # Refused for good (403, 409, 422): retrying will not help.
                _say(f"[runner] {failed}: refused, HTTP {error.code}")
                return None
            problem = f"HTTP {error.code}"
        except (urllib.error.URLError, OSError) as error:
            problem = clis.one_line(str(error), 200)
        if attempt < API_ATTEMPTS:
            time.sleep(attempt)
    _say(f"[runner] {failed} after {API_ATTEMPTS} attempts: {problem}")
    return None


def hand_over(env: Mapping[str, str], answer: str) -> None:
    """PUT the final answer to the job API: the job's output without a log read. A
    failure is logged and changes nothing else: the answer goes to stdout anyway."""
    try:
        attempt = int(env.get("AGENT_ATTEMPT") or "1")
    except ValueError:
        attempt = 1
    body = answer_body(answer, attempt)
    if _api_call(env, "PUT", "answer", body, "answer not handed over") is not None:
        _say("[runner] answer handed over")


def _report_usage(env: Mapping[str, str], result: clis.Outcome) -> None:
    """POST the run's usage to the job API; a failure to report is logged, not fatal."""
    if result.tokens == 0 and result.cost == 0:
        return  # Turns alone used nothing (a refused first request is a turn too).
    usage: dict[str, float] = {"tokens": result.tokens, "cost": result.cost}
    usage["turns"] = result.turns
    # The split, where the CLI gave one: the total alone is what older operators take.
    if result.input_tokens or result.output_tokens:
        usage |= {"inputTokens": result.input_tokens, "outputTokens": result.output_tokens}
    body = json.dumps(usage).encode()
    answered = _api_call(env, "POST", "usage", body, "usage not reported")
    if answered is not None:
        _say(f"[runner] usage reported: {answered}")


def print_anchor(env: Mapping[str, str]) -> int:
    """``agentchain agent anchor``: the job's anchor, read with its token, as a
    ``SessionStart`` hook's context on stdout. Nothing when the job wrote none or the
    API cannot say (the reason on stderr); always 0, so the hook never stops the agent."""
    missing = [name for name in JOB_ENV if not env.get(name)]
    if missing:
        _say(f"[anchor] no anchor: {', '.join(missing)} unset")
        return 0
    quote = urllib.parse.quote
    url = (
        f"{env['AGENT_API_URL'].rstrip('/')}/api/jobs/{quote(env['AGENT_NAMESPACE'], '')}"
        f"/{quote(env['AGENT_JOB'], '')}/anchor"
    )
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {env['AGENT_TOKEN']}"})
    try:
        with urllib.request.urlopen(request, timeout=API_TIMEOUT_SECONDS) as answer:
            body = json.loads(answer.read(API_MAX_BODY_BYTES))
    except urllib.error.HTTPError as error:
        if error.code != 404:  # 404: the job has written no anchor yet.
            _say(f"[anchor] not read: HTTP {error.code}")
        return 0
    except (urllib.error.URLError, OSError, ValueError) as error:
        _say(f"[anchor] not read: {clis.one_line(str(error), 200)}")
        return 0
    anchor = body.get("anchor") if isinstance(body, dict) else None
    if isinstance(anchor, dict) and anchor:
        print(clis.session_start_output(clis.anchor_context(anchor)), flush=True)
    return 0
