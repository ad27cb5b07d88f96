"""What the web layer answers when the Kubernetes API boundary raises.

A refusal a client can act on keeps its code (an invalid object is 422, the API's
own 403/404/409 stay so); throttling past the client's retries, a failing or an
unreachable API server is the server's trouble: 503.  Always the one JSON shape.
"""

from __future__ import annotations

import json

import pytest

from agentchain.kube import apierrors
from agentchain.web.responses import kube_error_response


def _status(code: int, reason: str) -> bytes:
    return json.dumps({"kind": "Status", "code": code, "reason": reason}).encode()


@pytest.mark.parametrize(
    ("code", "reason", "answer", "error"),
    [
        (400, "BadRequest", 422, "invalid object"),
        (422, "Invalid", 422, "invalid object"),
        (403, "Forbidden", 403, "forbidden"),
        (404, "NotFound", 404, "not found"),
        (409, "AlreadyExists", 409, "conflict"),
        (409, "Conflict", 409, "conflict"),
        (429, "TooManyRequests", 503, "kubernetes unavailable"),
        (500, "InternalError", 503, "kubernetes unavailable"),
        (401, "Unauthorized", 503, "kubernetes unavailable"),
    ],
)
def test_api_refusals_map_to_json(code: int, reason: str, answer: int, error: str) -> None:
    response = kube_error_response(apierrors.from_status(code, _status(code, reason)))
    assert response.status == answer
    assert response.body is not None and isinstance(response.body, bytes)
    assert json.loads(response.body)["error"] == error


def test_an_unreachable_api_server_is_503() -> None:
    response = kube_error_response(apierrors.Unreachable("connection refused"))
    assert response.status == 503
    assert isinstance(response.body, bytes)
    assert json.loads(response.body) == {
        "error": "kubernetes unavailable",
        "detail": "The API server did not answer.",
    }
