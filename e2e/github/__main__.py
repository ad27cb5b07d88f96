"""``python -m e2e.github``: run the GitHub stand-ins by hand until Ctrl-C.

Registers an App (its private key written next to the repositories), installs it on the
account of ``--repo`` (default ``acme/widgets``, created with a few commits on the git
server, issue #1 open), mints one installation token, and prints everything a client
needs: API URL, app id, key file, installation id, token and clone URL. Faults can then
be ordered with ``curl -X POST <api>/_standin/faults -d '{"kind": "rate_limit", "times": 3}'``
and the record read from ``<api>/_standin/requests`` and ``<api>/_standin/violations``.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
from pathlib import Path

from e2e.github.gitserver import GitServer
from e2e.github.standin import GitHubStandIn


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m e2e.github", description=__doc__)
    parser.add_argument("--repo", default="acme/widgets", help="owner/name to create")
    parser.add_argument("--prefix", default="", help='API path prefix, e.g. "/api/v3" (GHES)')
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="github-standin-") as scratch:
        serve(args.repo, args.prefix, Path(scratch))


def serve(repo: str, prefix: str, workdir: Path) -> None:
    with GitHubStandIn(prefix=prefix) as github, GitServer(github, workdir / "git") as git:
        git.create_repo(repo, {"README.md": "A repository served by the stand-in.\n"})
        github.add_issue(repo, "Widgets wobble", "They wobble when turned.")
        app = github.register_app()
        key_file = workdir / "app-private-key.pem"
        key_file.write_bytes(app.private_key_pem)
        installation = github.install(app, repo.split("/")[0])
        token = github.mint_token(installation)
        print(f"api:           {github.url}")
        print(f"app id:        {app.app_id} ({app.slug}), private key {key_file}")
        print(f"installation:  {installation.id} on {installation.account}")
        print(f"token (1 h):   {token}")
        print(f"clone:         git clone {git.clone_url(repo, token)}")
        print(f"record:        {github.origin}/_standin/requests (Ctrl-C stops)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        for violation in github.violations:
            print(f"violation: {violation}")


if __name__ == "__main__":
    main()
