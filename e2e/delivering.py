"""Signed GitHub deliveries sent to a running operator, as GitHub sends them.

The demo and the end-to-end tests that talk to the operator *process* (not an
in-process app, see ``webharness.py``) share this: seed 003's ``issues.opened``
payload, the ``X-Hub-Signature-256`` HMAC over the exact body bytes, and a POST
whose answer is returned whatever its status, so a test can assert a 4xx as
easily as a 202.  Sending the same ``(body, headers)`` twice is a redelivery:
same delivery id, same hook id, same bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.error
import urllib.request
import uuid
from typing import Any

from e2e import operating

PATH = "/webhooks/github"
HOOK_ID = "1"
Obj = dict[str, Any]


def issue_opened(number: int = 42, association: str = "OWNER") -> Obj:
    """Seed 003's triage trigger: an issue opened by the repository's owner."""
    return {
        "action": "opened",
        "issue": {
            # Unique like GitHub's: an identical signed body is one delivery, however sent.
            "id": uuid.uuid4().int >> 80,
            "number": number,
            "title": "Login fails after password reset",
            "body": "Steps: reset password, log in, see a 500. {{ not a template }}",
            "html_url": f"https://github.com/acme/webapp/issues/{number}",
            "author_association": association,
            "labels": [{"name": "bug"}],
            "user": {"login": "alice", "type": "User"},
        },
        "repository": {"full_name": "acme/webapp"},
        "sender": {"login": "alice", "type": "User"},
    }


def signed(
    secret: str,
    payload: Obj,
    event: str = "issues",
    delivery: str | None = None,
    hook_id: str = HOOK_ID,
) -> tuple[bytes, dict[str, str]]:
    """The body and GitHub's headers for one delivery (a fresh delivery id by default)."""
    body = json.dumps(payload).encode()
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-GitHub-Hook-ID": hook_id,
        "X-Hub-Signature-256": f"sha256={digest}",
    }
    return body, headers


def post(url: str, body: bytes, headers: dict[str, str], timeout: float = 30) -> tuple[int, Obj]:
    """POST a delivery to the operator at ``url``; its status and JSON answer."""
    request = urllib.request.Request(f"{url}{PATH}", data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return int(resp.status), json.loads(resp.read())
    except urllib.error.HTTPError as error:
        with error:
            return int(error.code), json.loads(error.read())


def send(op: operating.OperatorProcess, body: bytes, headers: dict[str, str]) -> tuple[int, Obj]:
    return post(op.url, body, headers)
