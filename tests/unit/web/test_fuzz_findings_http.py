"""Refusals the fuzz run (``e2e/test_api_fuzz.py``) found answered with a 500.

Lone UTF-16 surrogates: JSON can escape a surrogate that pairs with nothing
(``"\\ud800"``); Python decodes it to a string with no UTF-8 form, which failed
wherever it was encoded next (a store value, an anchor, an answer quoting it).
Undecodable bodies: a ``Content-Encoding: gzip`` body that stops decoding while a
handler reads it raised aiohttp's ``RequestPayloadError`` through every handler.

Aspects covered:
* a job API body holding a lone surrogate (a store value, an anchor field, a prompt,
  a key) is a 422 naming the problem, before anything is stored or asked of
  Kubernetes; a paired surrogate escape (an emoji) is ordinary text;
* ``json_response`` writes a lone surrogate back as the same ``\\u`` escape: valid
  JSON that decodes to the original string (the webhook quotes payload text in reasons);
* a body with a Content-Encoding (decodable or not) is a JSON 415, on the job API and
  on the webhook: the server decompresses nothing (issue 14).
"""

from __future__ import annotations

import gzip
import io
import json
from typing import Any

import pytest

from agentchain.core.runtime import Runtime
from agentchain.web.hooks.signatures import sign
from agentchain.web.requests import loads_unicode
from agentchain.web.responses import json_response
from tests.unit.web.conftest import ADMIN_TOKEN, WEBHOOK_SECRET, Client

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def job_token(rt: Runtime) -> dict[str, str]:
    token = await rt.tokens.issue("team-a", "job-1", "uid-1", "chain-1", 600)
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    ("method", "path", "body", "as_job"),
    [
        ("PUT", "/api/store/notes/k?tenant=team-a", b'{"value": "a\\ud800"}', False),
        ("PUT", "/api/store/notes/k", b'{"value": "\\udfff"}', True),
        ("PUT", "/api/store/notes/k", b'{"value": "x", "\\udc00": 1}', True),
        ("PUT", "/api/jobs/team-a/job-1/anchor", b'{"task": "\\uDBFF"}', True),
        ("PUT", "/api/jobs/team-a/job-1/anchor", b'{"files": [["\\ud800"]]}', True),
        (
            "POST",
            "/api/jobs",
            b'{"namespace": "team-a", "agentRole": "a", "prompt": "\\ud800"}',
            False,
        ),
        ("POST", "/api/jobs", b'{"agentRole": "a", "task": "\\ud800"}', True),
    ],
)
async def test_a_lone_surrogate_in_a_body_is_422(
    client: Client, runtime: Runtime, method: str, path: str, body: bytes, as_job: bool
) -> None:
    headers = await job_token(runtime) if as_job else ADMIN
    before = set(await runtime.redis.keys("*"))
    response = await client.request(method, path, data=body, headers=headers)
    assert response.status == 422, await response.text()
    answer = await response.json()
    assert answer["error"] == "invalid body" and "surrogate" in answer["detail"]
    assert set(await runtime.redis.keys("*")) == before  # Nothing was stored.


async def test_a_paired_surrogate_escape_is_ordinary_text(client: Client, runtime: Runtime) -> None:
    body = b'{"value": "\\ud83d\\ude00 and \\\\ud800"}'  # An emoji, and an escaped backslash.
    response = await client.put("/api/store/notes/k", data=body, headers=await job_token(runtime))
    assert response.status == 200, await response.text()
    assert (await response.json())["value"] == "\U0001f600 and \\ud800"


@pytest.mark.parametrize(
    "raw", [b'"\\ud800"', b'["\\udfff"]', b'{"a": {"\\ud800": 1}}', b'"\\ud83d"']
)
def test_loads_unicode_refuses_lone_surrogates(raw: bytes) -> None:
    with pytest.raises(ValueError, match="surrogate"):
        loads_unicode(raw)


async def test_a_raw_surrogate_in_a_body_is_refused_not_a_500(
    client: Client, runtime: Runtime
) -> None:
    # UTF-8 bytes of U+D800, which json.loads(bytes) used to accept ("surrogatepass").
    body = b'{"value": "\xed\xa0\x80"}'
    response = await client.put("/api/store/notes/k", data=body, headers=await job_token(runtime))
    assert response.status == 422, await response.text()
    assert (await response.json())["error"] == "invalid body"


def test_loads_unicode_keeps_a_leading_bom_acceptable() -> None:
    assert loads_unicode(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}


@pytest.mark.parametrize("value", ["acme/\ud800", {"\udfff": ["x\udc00"]}, "ok é \U0001f600"])
def test_json_response_writes_lone_surrogates_as_their_escape(value: Any) -> None:
    response = json_response({"reason": value})
    assert response.content_type == "application/json" and response.charset == "utf-8"
    assert isinstance(response.body, bytes)
    assert json.loads(response.body) == {"reason": value}


# Eight bytes: too short for gzip to fail before the end, so a handler would be reading.
NOT_GZIP = b"not gzip"


async def test_a_body_its_content_encoding_does_not_decode_is_415(client: Client) -> None:
    response = await client.put(
        "/api/store/notes/k?tenant=team-a",
        data=io.BytesIO(NOT_GZIP),
        headers={**ADMIN, "Content-Encoding": "gzip", "Content-Type": "application/json"},
    )
    assert response.status == 415, await response.text()
    assert (await response.json())["error"] == "unsupported content encoding"


async def test_a_webhook_body_its_content_encoding_does_not_decode_is_415(
    client: Client,
) -> None:
    headers = {
        "X-GitHub-Event": "ping",
        "X-GitHub-Delivery": "d-1",
        "X-Hub-Signature-256": sign(NOT_GZIP, WEBHOOK_SECRET),
        "Content-Type": "application/json",
        "Content-Encoding": "gzip",
    }
    response = await client.post("/webhooks/github", data=io.BytesIO(NOT_GZIP), headers=headers)
    assert response.status == 415, await response.text()
    assert (await response.json())["error"] == "unsupported content encoding"


async def test_a_gzip_body_is_refused_not_decoded(client: Client) -> None:
    """The server decompresses no request body (issue 14): one rule for every path."""
    response = await client.put(
        "/api/store/notes/k?tenant=team-a",
        data=io.BytesIO(gzip.compress(b'{"value": "zipped"}')),
        headers={**ADMIN, "Content-Encoding": "gzip", "Content-Type": "application/json"},
    )
    assert response.status == 415, await response.text()
