"""The ``agentchain workspace`` command group: flags, environment, one JSON line out.

Each command prints exactly one JSON line on stdout, also when it fails
(``{"outcome": "<failure>", "error": "..."}``), and exits with a code of
``workspaces.rules.checkouts`` (``EXIT_*``), so the pod that ran it can be judged by its exit
code and its last line alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentchain.workspaces.inpod import credentials, gitting, preparing, pushing, reporting
from agentchain.workspaces.inpod.layout import Layout, WorkspaceError
from agentchain.workspaces.rules import checkouts

TOKEN_FILE_ENV = "AGENTCHAIN_GIT_TOKEN_FILE"
GIT_BASE_URL_ENV = "AGENTCHAIN_GIT_BASE_URL"
ERROR_MAX_CHARS = 600


def add_parser(sub: Any) -> None:
    """Register ``workspace prepare|report|publish`` on the CLI's subparsers."""
    group = sub.add_parser("workspace", help="the chain's git workspace (runs in pods)")
    commands = group.add_subparsers(dest="workspace_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--workspace",
        default=None,
        help="the volume's mount path (default: $AGENT_WORKSPACE, /workspace)",
    )
    remote = argparse.ArgumentParser(add_help=False)
    remote.add_argument(
        "--repository",
        required=True,
        help="owner/name (under --git-base-url) or an http(s) git URL",
    )
    remote.add_argument(
        "--git-base-url",
        default=None,
        help=(
            f"where owner/name repositories are (default: ${GIT_BASE_URL_ENV}, "
            f"{checkouts.DEFAULT_GIT_BASE_URL})"
        ),
    )
    remote.add_argument(
        "--token-file",
        default=None,
        help=(f"a file holding the token (default: ${TOKEN_FILE_ENV}; none: anonymous)"),
    )
    remote.add_argument(
        "--token-user",
        default=credentials.DEFAULT_USER,
        help="the user name sent with the token (GitHub: x-access-token)",
    )
    prepare = commands.add_parser(
        "prepare", parents=[common, remote], help="clone the repository once (idempotent)"
    )
    prepare.add_argument(
        "--ref", default=None, help="branch, refs/... or commit id (default: the default branch)"
    )
    prepare.add_argument(
        "--branch", default=None, help="the local branch to check out (default: the ref's branch)"
    )
    prepare.add_argument("--depth", type=int, default=0, help="shallow clone depth (0: all)")
    commands.add_parser("report", parents=[common], help="one JSON line: what changed")
    publish = commands.add_parser(
        "publish", parents=[common, remote], help="push HEAD to the branch, exactly once"
    )
    publish.add_argument("--branch", required=True, help="e.g. agentchain/<chain-id>")


def main(args: argparse.Namespace) -> int:
    handlers: dict[str, Callable[[argparse.Namespace], tuple[int, dict[str, Any] | str]]] = {
        "prepare": _prepare, "report": _report, "publish": _publish,
    }  # fmt: skip
    try:
        code, out = handlers[args.workspace_command](args)
    except (ValueError, credentials.CredentialError) as exc:
        code, out = checkouts.EXIT_USAGE, _error("usage", str(exc))
    except WorkspaceError as exc:
        code, out = checkouts.EXIT_FAILED, _error("failed", str(exc))
    except gitting.GitError as exc:
        failure = checkouts.push_failure(exc.stderr)
        outcome = failure if failure in ("denied", "transient") else "failed"
        code, out = checkouts.exit_code(failure), _error(outcome, str(exc))
    line = out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)
    print(line, flush=True)
    return code


def _prepare(args: argparse.Namespace) -> tuple[int, dict[str, Any] | str]:
    url, env = _remote(args)
    if args.ref is not None and (problem := checkouts.ref_problem(args.ref)):
        raise ValueError(problem)
    if args.branch is not None and (problem := checkouts.ref_name_problem(args.branch)):
        raise ValueError(f"branch {args.branch!r}: {problem}")
    if args.depth < 0:
        raise ValueError("--depth is 0 (the whole history) or more")
    checkout = preparing.Checkout(url, args.ref, args.branch, args.depth)
    return checkouts.EXIT_OK, preparing.prepare(Layout.at(args.workspace), checkout, env)


def _report(args: argparse.Namespace) -> tuple[int, dict[str, Any] | str]:
    return checkouts.EXIT_OK, reporting.report(Layout.at(args.workspace), gitting.environment())


def _publish(args: argparse.Namespace) -> tuple[int, dict[str, Any] | str]:
    if problem := checkouts.ref_name_problem(args.branch):
        raise ValueError(f"branch {args.branch!r}: {problem}")
    url, env = _remote(args)
    outcome = pushing.publish(Layout.at(args.workspace), url, args.branch, env)
    return outcome.code, outcome.fields


def _remote(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    base = args.git_base_url or os.environ.get(GIT_BASE_URL_ENV) or checkouts.DEFAULT_GIT_BASE_URL
    url = checkouts.repository_url(args.repository, base)
    token_file = args.token_file or os.environ.get(TOKEN_FILE_ENV)
    token = credentials.read_token(Path(token_file)) if token_file else None
    return url, gitting.environment(credentials.auth_config(url, token, args.token_user))


def _error(outcome: str, message: str) -> dict[str, Any]:
    return {"outcome": outcome, "error": checkouts.display_path(message, ERROR_MAX_CHARS)}


def run(argv: list[str]) -> int:
    """``agentchain workspace ...`` on its own (for tests and ``python -m``)."""
    parser = argparse.ArgumentParser(prog="agentchain")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
