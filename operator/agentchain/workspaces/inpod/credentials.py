"""The token a clone or push uses: read from a file, given to git only in its environment.

The token file is a mounted Secret (or one the engine fetched) in the container that
runs ``prepare`` or ``publish``; the agent container does not get it unless its
AiAgent declares ``contents: write``. The token never goes into a URL, ``.git/config``
or any file under the workspace: it becomes one ``http.<url>.extraHeader`` entry of
the git command's environment (``gitting.environment``), scoped to the repository's
URL, so git sends it to that repository only (not to a host a redirect names).
GitHub takes installation tokens as the password of ``x-access-token``; other hosts
take a token with any user name (``--token-user``).
"""

from __future__ import annotations

import base64
from pathlib import Path

TOKEN_MAX_BYTES = 16 * 1024
DEFAULT_USER = "x-access-token"


class CredentialError(Exception):
    """The token file is missing, empty or not a token (the message names the file only)."""


def read_token(path: Path) -> str:
    """The token in ``path`` (surrounding whitespace ignored)."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(TOKEN_MAX_BYTES + 1)
    except OSError as exc:
        raise CredentialError(f"token file {path}: {exc.strerror or exc}") from None
    token = raw.decode("ascii", "replace").strip()
    if len(raw) > TOKEN_MAX_BYTES or not token or not token.isprintable() or " " in token:
        raise CredentialError(f"token file {path}: not a token (one line of printable ASCII)")
    return token


def auth_config(url: str, token: str | None, user: str = DEFAULT_USER) -> list[tuple[str, str]]:
    """The git configuration that authenticates requests to ``url`` with ``token``."""
    if token is None:
        return []
    basic = base64.b64encode(f"{user}:{token}".encode()).decode("ascii")
    return [(f"http.{url}.extraHeader", f"Authorization: Basic {basic}")]
