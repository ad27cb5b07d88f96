"""Who may stop jobs and chains through the job API (web/jobapi/stoproutes.py), before Kubernetes.

Aspects covered:
- no token, or an invalid one: 401 on both stop routes;
- a job token may stop nothing, not even its own job or chain: 403 before any read;
- a body that is not the documented StopRequest (unknown field, reason too long, not
  JSON) is a 422 before anything is asked to stop;
- both routes are in the OpenAPI document with their 202 and 409 answers;
- usage reports: only the job's own token (403 for another job's or an admin's), and a
  malformed report (a split of its tokens into input and output over its total among
  them) is a 422 that counts nothing; a report of the split alone counts its sum;
- progress notes: only the job's own token (403 for another job's or an admin's); an
  empty, overlong or malformed note is a 422 (all answered before Kubernetes);
- answers: only the job's own token hands one over (403 for another job's or an
  admin's, 401 without); an answer over the cap is a 413, a malformed body a 422, both
  storing nothing; the same answer twice is accepted, another one for the attempt or
  one after its capture is a 409; the route is documented with a required body.
"""

from __future__ import annotations

import io
import json

import pytest

from agentchain.core.runtime import Runtime
from agentchain.store.answers import ANSWER_MAX_BYTES, Answer, AnswerStore
from agentchain.store.outputs import Capture
from agentchain.web.schemas import UsageReport
from tests.unit.web.conftest import Client
from tests.unit.web.jobapi.test_reads_http import ADMIN, error, job_token

JOB = "/api/jobs/team-a/job-1/stop"
CHAIN = "/api/chains/team-a/chain-of-job-1/stop"


@pytest.mark.parametrize("path", [JOB, CHAIN])
@pytest.mark.parametrize("header", [None, "Bearer nope"])
async def test_a_stop_without_a_valid_token_is_401(
    client: Client, path: str, header: str | None
) -> None:
    headers = {"Authorization": header} if header else {}
    await error(await client.post(path, json={}, headers=headers), 401)


@pytest.mark.parametrize("path", [JOB, CHAIN])
async def test_a_job_token_stops_nothing_not_even_its_own_job(
    client: Client, runtime: Runtime, path: str
) -> None:
    body = await error(await client.post(path, json={}, headers=await job_token(runtime)), 403)
    assert "admin" in body["detail"]


@pytest.mark.parametrize("path", [JOB, CHAIN])
@pytest.mark.parametrize(
    "body",
    [b'{"why": "x"}', b'{"reason": "' + b"x" * 201 + b'"}', b"{", b'{"reason": 3}', b"null"],
)
async def test_a_bad_stop_body_is_422_before_anything_is_read(
    client: Client, path: str, body: bytes
) -> None:
    headers = {**ADMIN, "Content-Type": "application/json"}
    await error(await client.post(path, data=body, headers=headers), 422)


async def test_the_stop_routes_are_documented(client: Client) -> None:
    doc = await (await client.get("/api/openapi.json")).json()
    for path in ("/api/jobs/{namespace}/{name}/stop", "/api/chains/{namespace}/{chainId}/stop"):
        answers = doc["paths"][path]["post"]["responses"]
        assert {"202", "401", "403", "404", "409", "422"} <= set(answers), path
    assert doc["components"]["schemas"]["StopRequest"]["properties"]["reason"]["maxLength"] == 200


USAGE = "/api/jobs/team-a/job-1/usage"


async def test_only_the_job_itself_reports_its_usage(client: Client, runtime: Runtime) -> None:
    other = await job_token(runtime, "team-a", "job-2")
    await error(await client.post(USAGE, json={"tokens": 1}, headers=other), 403)
    await error(await client.post(USAGE, json={"tokens": 1}, headers=ADMIN), 403)
    await error(await client.post(USAGE, json={"tokens": 1}), 401)


@pytest.mark.parametrize(
    "body",
    [
        {"tokens": -1},
        {"cost": -0.5},
        {"cost": "1"},
        {"spent": 3},
        {"tokens": 10**13},
        {"turns": -1},
        {"turns": 1.5},
        {"inputTokens": -1},
        {"outputTokens": "2"},
        {"tokens": 10, "inputTokens": 8, "outputTokens": 3},  # More than the total.
    ],
)
async def test_a_bad_usage_report_is_422_and_counts_nothing(
    client: Client, runtime: Runtime, body: dict[str, object]
) -> None:
    await error(await client.post(USAGE, json=body, headers=await job_token(runtime)), 422)
    assert await runtime.redis.keys("agentchain:flow:usage:*") == []


def test_a_usage_report_of_the_split_alone_counts_its_sum_as_the_total() -> None:
    split = UsageReport.model_validate({"inputTokens": 100, "outputTokens": 20})
    assert (split.tokens, split.input_tokens, split.output_tokens) == (120, 100, 20)
    # A total that counts more than the split (Gemini's thoughts) is kept as it is.
    assert UsageReport.model_validate({"tokens": 130, "inputTokens": 100}).tokens == 130
    old = UsageReport.model_validate({"tokens": 50, "cost": 0.1})  # An agent of before.
    assert (old.tokens, old.input_tokens, old.output_tokens) == (50, 0, 0)


NOTE = "/api/jobs/team-a/job-1/progress"


async def test_only_the_job_itself_leaves_its_progress_note(
    client: Client, runtime: Runtime
) -> None:
    other = await job_token(runtime, "team-a", "job-2")
    await error(await client.put(NOTE, json={"note": "hi"}, headers=other), 403)
    await error(await client.put(NOTE, json={"note": "hi"}, headers=ADMIN), 403)
    await error(await client.put(NOTE, json={"note": "hi"}), 401)


@pytest.mark.parametrize(
    "body", [{"note": ""}, {"note": "x" * 301}, {"note": 3}, {"text": "hi"}, {"note": "a", "b": 1}]
)
async def test_a_bad_progress_note_is_422(
    client: Client, runtime: Runtime, body: dict[str, object]
) -> None:
    await error(await client.put(NOTE, json=body, headers=await job_token(runtime)), 422)


ANSWER = "/api/jobs/team-a/job-1/answer"
UID = "uid-job-1"  # The uid ``job_token`` issues job-1's token for.


async def test_only_the_job_itself_hands_over_its_answer(client: Client, runtime: Runtime) -> None:
    body = {"answer": "done", "attempt": 1}
    other = await job_token(runtime, "team-a", "job-2")
    await error(await client.put(ANSWER, json=body, headers=other), 403)
    await error(await client.put(ANSWER, json=body, headers=ADMIN), 403)
    await error(await client.put(ANSWER, json=body), 401)
    assert await runtime.redis.keys("agentchain:answer:*") == []
    own = await client.put(ANSWER, json=body, headers=await job_token(runtime))
    assert own.status == 200, await own.text()
    assert (await own.json())["stored"] is True
    stored = await AnswerStore(runtime.redis).get("team-a", "job-1", UID, 1)
    assert stored == Answer(1, "done", 4)


async def test_an_answer_is_once_per_attempt(client: Client, runtime: Runtime) -> None:
    headers = await job_token(runtime)
    body = {"answer": "done \u00e9", "attempt": 1}
    assert (await client.put(ANSWER, json=body, headers=headers)).status == 200
    again = await client.put(ANSWER, json=body, headers=headers)  # A retry: the same answer.
    assert again.status == 200 and (await again.json())["stored"] is False
    other = {"answer": "changed my mind", "attempt": 1}
    await error(await client.put(ANSWER, json=other, headers=headers), 409)
    stored = await AnswerStore(runtime.redis).get("team-a", "job-1", UID, 1)
    assert stored is not None and stored.text == "done \u00e9" and stored.full_size == 7


async def test_an_answer_after_its_attempts_capture_is_409(
    client: Client, runtime: Runtime
) -> None:
    await runtime.outputs.put("team-a", "job-1", UID, b"log", capture=Capture(1, 0, "p", False))
    body = {"answer": "late", "attempt": 1}
    await error(await client.put(ANSWER, json=body, headers=await job_token(runtime)), 409)
    assert await runtime.redis.keys("agentchain:answer:*") == []


async def test_a_cut_answer_keeps_its_whole_size(client: Client, runtime: Runtime) -> None:
    body = {"answer": "the end", "attempt": 2, "truncated": True, "size": 10_000_000}
    answered = await client.put(ANSWER, json=body, headers=await job_token(runtime))
    assert answered.status == 200, await answered.text()
    assert (await answered.json())["truncated"] is True
    stored = await AnswerStore(runtime.redis).get("team-a", "job-1", UID, 2)
    assert stored == Answer(2, "the end", 10_000_000)


async def test_an_answer_over_the_cap_is_413(client: Client, runtime: Runtime) -> None:
    headers = {**await job_token(runtime), "Content-Type": "application/json"}

    def body(answer: str) -> io.BytesIO:
        return io.BytesIO(json.dumps({"answer": answer, "attempt": 1}, ensure_ascii=False).encode())

    # Within the character limit, over the byte limit: two bytes a character.
    over = body("\u00e9" * (ANSWER_MAX_BYTES // 2 + 1))
    answered = await error(await client.put(ANSWER, data=over, headers=headers), 413)
    assert answered["limit"] == ANSWER_MAX_BYTES
    huge = body("x" * (1024 * 1024 + 1))  # Over the body cap.
    await error(await client.put(ANSWER, data=huge, headers=headers), 413)
    assert await runtime.redis.keys("agentchain:answer:*") == []


@pytest.mark.parametrize(
    "body",
    [
        {"answer": "x"},
        {"attempt": 1},
        {"answer": 3, "attempt": 1},
        {"answer": "x", "attempt": 0},
        {"answer": "x", "attempt": "1"},
        {"answer": "x", "attempt": 1, "truncated": True},
        {"answer": "xyz", "attempt": 1, "truncated": True, "size": 2},
        {"answer": "xyz", "attempt": 1, "size": 4},
        {"answer": "x", "attempt": 1, "extra": 1},
        None,
    ],
)
async def test_a_bad_answer_body_is_422_and_stores_nothing(
    client: Client, runtime: Runtime, body: dict[str, object] | None
) -> None:
    await error(await client.put(ANSWER, json=body, headers=await job_token(runtime)), 422)
    assert await runtime.redis.keys("agentchain:answer:*") == []


async def test_the_answer_route_is_documented(client: Client) -> None:
    doc = await (await client.get("/api/openapi.json")).json()
    put = doc["paths"]["/api/jobs/{namespace}/{name}/answer"]["put"]
    assert put["requestBody"]["required"] is True
    assert {"200", "401", "403", "409", "413", "422"} <= set(put["responses"])
    schema = doc["components"]["schemas"]["AnswerHandover"]
    assert set(schema["required"]) == {"answer", "attempt"}
    assert schema["properties"]["answer"]["maxLength"] == ANSWER_MAX_BYTES
