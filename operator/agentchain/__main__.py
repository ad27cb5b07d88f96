"""The ``agentchain`` command: the operator, the CRD generator and the demo agent.

One entry point for the one image: ``agentchain run`` is one operator replica (the
webhook and API always, kopf's engine while it holds the leader Lease: ``replica.py``),
``agentchain demo-agent`` the deterministic agent the demo and
tests run, ``agentchain crds`` regenerates ``crds/`` from the models, ``agentchain
workspace prepare|report|publish`` the git side of a chain's workspace (in pods),
``agentchain mcp`` the job's MCP tools for the agent's CLI, and ``agentchain agent run``
the runner between an agent's pod and its CLI (both in the agent's pod).
"""

from __future__ import annotations

import argparse
import logging
import sys


def _run(args: argparse.Namespace) -> int:
    import pydantic

    import agentchain.handlers  # noqa: F401  (registers the handlers)
    from agentchain import replica, settings
    from agentchain.core.runtime import MISSING_KEY_MESSAGE

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        config = settings.from_arguments(args)
    except pydantic.ValidationError as exc:
        print(f"agentchain: invalid settings: {exc}", file=sys.stderr)
        return 2
    if not config.operator_key:
        print(f"agentchain: {MISSING_KEY_MESSAGE}", file=sys.stderr)
        return 2
    problems = replica.timing_problems(config)
    if problems:
        print(f"agentchain: leader election: {'; '.join(problems)}", file=sys.stderr)
        return 2
    # Web on every replica; kopf's handlers only in the one holding the Lease.
    return replica.main(config, liveness=args.liveness)


def _config_reference(args: argparse.Namespace) -> int:
    from agentchain import settings

    with open(args.output, "w", encoding="utf-8") as fh:
        fh.write(settings.reference())
    return 0


def _crds(args: argparse.Namespace) -> int:
    from agentchain import crdgen

    return crdgen.main(["--crds-dir", args.output, "--reference", args.docs])


def _demo_agent(rest: list[str]) -> int:
    from agentchain import demo_agent

    return demo_agent.main(rest)


def _agent(args: argparse.Namespace) -> int:
    from agentchain.runtimes.inpod import runner

    return runner.main(args)


def _workspace(args: argparse.Namespace) -> int:
    from agentchain.workspaces.inpod import cli

    return cli.main(args)


def _mcp(args: argparse.Namespace) -> int:
    from agentchain.runtimes.inpod import mcpserving

    return mcpserving.main()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo-agent"]:
        return _demo_agent(argv[1:])
    parser = argparse.ArgumentParser(prog="agentchain")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the operator (kopf handlers, webhook, job API)")
    run.add_argument(
        "--liveness",
        default=None,
        help="kopf liveness endpoint, e.g. http://0.0.0.0:8082/healthz (served while leading"
        " only; the internal port's /healthz is on every replica)",
    )
    from agentchain import settings

    settings.add_arguments(run)
    crds = sub.add_parser(
        "crds", help="write crds/*.yaml and docs/reference/crds.md from the models"
    )
    crds.add_argument("--output", default="crds")
    crds.add_argument("--docs", default="docs/reference/crds.md")
    reference = sub.add_parser(
        "config-reference", help="write docs/configuration.md from the settings model"
    )
    reference.add_argument("--output", default="docs/configuration.md")
    sub.add_parser("demo-agent", help="the deterministic demo agent (see --help after it)")
    from agentchain.workspaces.inpod import cli

    cli.add_parser(sub)
    sub.add_parser(
        "mcp",
        help="serve the job's agentchain tools (delegation, store, anchors, GitHub token)"
        " to the agent's CLI over MCP on stdio (inside an agent's pod)",
    )
    from agentchain.runtimes.inpod import runner

    runner.add_parser(sub)
    args = parser.parse_args(argv)
    handlers = {"run": _run, "crds": _crds, "config-reference": _config_reference,
                "workspace": _workspace, "mcp": _mcp, "agent": _agent}  # fmt: skip
    return handlers[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
