"""A deterministic stand-in for an AI agent, for demos and end-to-end tests.

It needs no network and no model: it reads the same environment a real agent
gets (SPEC §1), prints a triage/developer/reviewer-style report that quotes
the context it received, and can be told to fail, to sleep or to print a lot,
so every chain behaviour can be exercised on the test suite's real node or on kind.

In a container it is often process 1, which Linux spares from a signal's default action:
without a handler of its own a SIGTERM (a stop, a deleted pod) would be ignored and the
kubelet would wait out the whole grace period before it kills it. So it ends on SIGTERM
with 143, as a shell does.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Mapping

REPORTS = {
    "triage": ["Issue Analysis:", "- Type: Bug", "- Priority: High", "- Next: hand to developer"],
    "developer": [
        "Implementation:",
        "- Patched the failing code path",
        "- Added a regression test",
    ],
    "reviewer": ["Review:", "- Change looks correct", "- Verdict: approve"],
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="agentchain demo-agent", description=__doc__)
    p.add_argument("--exit-code", type=int, default=0, help="exit with this code")
    p.add_argument("--sleep", type=float, default=0.0, help="seconds to sleep before reporting")
    p.add_argument("--print-chars", type=int, default=0, help="also print this many filler chars")
    p.add_argument("--say", action="append", default=[], help="extra line(s) to print last")
    p.add_argument("--no-context", action="store_true", help="do not echo the prompt")
    return p.parse_args(argv)


def _style(role: str) -> list[str]:
    for key, lines in REPORTS.items():
        if key in role:
            return lines
    return ["Report:", f"- Agent {role or 'unknown'} did its work"]


def read_prompt(env: Mapping[str, str]) -> str:
    """The whole prompt: the file AGENT_PROMPT_FILE names (AGENT_PROMPT holds only the
    beginning of a very long one); AGENT_PROMPT outside a pod, where there is no file."""
    path = env.get("AGENT_PROMPT_FILE")
    if path:
        try:
            with open(path, encoding="utf-8", errors="replace", newline="") as file:
                return file.read()
        except FileNotFoundError:
            pass
    return env.get("AGENT_PROMPT", "")


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminated)
    env = os.environ
    role = env.get("AGENT_ROLE", "")
    if args.sleep:
        time.sleep(args.sleep)
    out = sys.stdout
    out.write(f"== {role or 'agent'} report (job {env.get('AGENT_JOB', '?')}) ==\n")
    out.write(f"model={env.get('AGENT_MODEL', '')} chain={env.get('AGENT_CHAIN_ID', '')}\n")
    if not args.no_context:
        out.write("--- prompt received ---\n")
        out.write(read_prompt(env) + "\n")
        out.write("--- end of prompt ---\n")
    if args.print_chars:
        filler = "0123456789abcdefghijklmnopqrstuvwxyz"
        out.write((filler * (args.print_chars // len(filler) + 1))[: args.print_chars] + "\n")
    out.write("\n".join(_style(role)) + "\n")
    for line in args.say:
        out.write(line + "\n")
    out.flush()
    return int(args.exit_code)


if __name__ == "__main__":
    raise SystemExit(main())
