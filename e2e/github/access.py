"""Who is calling, and whether GitHub would let them: App JWTs and installation tokens.

* ``Authorization: Bearer <JWT>`` authenticates as an App: RS256, signed by the private
  key whose public half was registered, ``iss`` = the app id, ``iat``/``exp`` present and
  ``exp`` at most 10 minutes after ``iat`` and in the future (GitHub's rules; 60 s of clock
  drift allowed on ``iat`` as GitHub does). Only ``/app/...`` style endpoints take it.
* ``Authorization: token ghs_...`` (or ``Bearer ghs_...``) is an installation token: it must
  be known, unrevoked and unexpired (else 401), and reaches only its repositories (others:
  404 if private, read-only if public) with its permissions (else 403).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from e2e.github import model

JWT_MAX_LIFETIME_SECONDS = 600
CLOCK_DRIFT_SECONDS = 60
NOT_ACCESSIBLE = "Resource not accessible by integration"


@dataclass(frozen=True)
class Identity:
    kind: str  # "anonymous", "app", "installation"
    app_id: int | None = None
    installation_id: int | None = None
    token: model.Token | None = None

    def __str__(self) -> str:
        if self.kind == "app":
            return f"app:{self.app_id}"
        if self.kind == "installation":
            return f"installation:{self.installation_id}"
        return "anonymous"


ANONYMOUS = Identity("anonymous")


def identify(state: model.State, header: str | None) -> Identity:
    """The caller named by an ``Authorization`` header, or Refused 401 as GitHub says it."""
    if not header:
        return ANONYMOUS
    scheme, _, credential = header.strip().partition(" ")
    credential = credential.strip()
    if scheme.lower() == "basic":
        credential = _basic_password(credential)
    elif scheme.lower() not in ("token", "bearer"):
        raise model.Refused(401, "Bad credentials")
    if credential.count(".") == 2:
        return _app_identity(state, credential)
    return token_identity(state, credential)


def _basic_password(encoded: str) -> str:
    try:
        return base64.b64decode(encoded, validate=True).decode().partition(":")[2]
    except (ValueError, UnicodeDecodeError):
        raise model.Refused(401, "Bad credentials") from None


def token_identity(state: model.State, value: str) -> Identity:
    with state.lock:
        token = state.tokens.get(value)
        if token is None or not token.usable(model.now()):
            raise model.Refused(401, "Bad credentials")
        return Identity(
            "installation",
            state.installations[token.installation_id].app_id,
            token.installation_id,
            token,
        )


def _app_identity(state: model.State, encoded: str) -> Identity:
    try:
        claims = jwt.decode(encoded, options={"verify_signature": False})
        app = state.apps.get(int(claims["iss"]))
    except (jwt.PyJWTError, KeyError, TypeError, ValueError):
        raise model.Refused(401, "A JSON web token could not be decoded") from None
    if app is None:
        raise model.Refused(401, "Integration not found")
    key: Any = load_pem_public_key(app.public_key_pem)
    try:
        claims = jwt.decode(
            encoded,
            key,
            algorithms=["RS256"],
            leeway=CLOCK_DRIFT_SECONDS,
            options={"require": ["iat", "exp", "iss"]},
        )
    except jwt.ExpiredSignatureError:
        raise model.Refused(
            401,
            "'Expiration time' claim ('exp') must be a numeric value "
            "representing the future time at which the assertion "
            "expires",
        ) from None
    except jwt.PyJWTError:
        raise model.Refused(401, "A JSON web token could not be decoded") from None
    if int(claims["exp"]) - int(claims["iat"]) > JWT_MAX_LIFETIME_SECONDS:
        raise model.Refused(401, "'Expiration time' claim ('exp') is too far in the future")
    return Identity("app", app.id)


def require_app(identity: Identity) -> int:
    if identity.kind != "app" or identity.app_id is None:
        raise model.Refused(401, "A JSON web token could not be decoded")
    return identity.app_id


def require_installation(identity: Identity) -> model.Token:
    if identity.token is None:
        raise model.Refused(
            401, "Bad credentials" if identity.kind == "app" else "Requires authentication"
        )
    return identity.token


def repository(
    state: model.State, identity: Identity, owner: str, name: str, permission: str, level: str
) -> model.Repo:
    """The repository if ``identity`` may use it for ``permission: level``, else Refused."""
    repo = state.repo(owner, name)
    if identity.kind == "app":
        raise model.Refused(403, NOT_ACCESSIBLE)
    if identity.token is None:  # anonymous
        if repo is None or repo.private:
            raise model.Refused(404, "Not Found")
        if level != "read":
            raise model.Refused(401, "Requires authentication")
        return repo
    if repo is None:
        raise model.Refused(404, "Not Found")
    if not _token_reaches(state, identity.token, repo):
        if repo.private:
            raise model.Refused(404, "Not Found")
        if level != "read":
            raise model.Refused(403, NOT_ACCESSIBLE)
        return repo
    if not model.allows(identity.token.permissions, permission, level):
        raise model.Refused(403, NOT_ACCESSIBLE)
    return repo


def _token_reaches(state: model.State, token: model.Token, repo: model.Repo) -> bool:
    installation = state.installations[token.installation_id]
    if not installation.covers(repo):
        return False
    return token.repositories is None or repo.full_name in token.repositories
