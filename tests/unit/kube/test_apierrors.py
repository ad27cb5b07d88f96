"""The API's Status body as a typed exception, and the retry decision and schedule.

Pure functions (``agentchain.kube.apierrors``): which class a refusal becomes (by the
Status' ``reason`` first, its code second, a proxy's non-Status body by the code
alone), how ``Retry-After`` is read, and when and how long the client waits.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.kube import apierrors


def _status(code: int, reason: str, **extra: object) -> bytes:
    body = {"kind": "Status", "status": "Failure", "code": code, "reason": reason, **extra}
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (404, "NotFound", apierrors.NotFound),
        (409, "AlreadyExists", apierrors.AlreadyExists),
        (409, "Conflict", apierrors.Conflict),
        (410, "Expired", apierrors.Gone),
        (410, "Gone", apierrors.Gone),
        (403, "Forbidden", apierrors.Forbidden),
        (401, "Unauthorized", apierrors.Unauthorized),
        (400, "BadRequest", apierrors.BadRequest),
        (422, "Invalid", apierrors.Invalid),
        (429, "TooManyRequests", apierrors.TooManyRequests),
        (500, "InternalError", apierrors.ServerError),
        (503, "ServiceUnavailable", apierrors.ServerError),
        (504, "Timeout", apierrors.ServerError),
    ],
)
def test_the_status_reason_picks_the_class(code: int, reason: str, cls: type) -> None:
    exc = apierrors.from_status(code, _status(code, reason, message="m"))
    assert type(exc) is cls
    assert (exc.code, exc.reason, exc.message) == (code, reason, "m")


def test_already_exists_is_a_conflict_and_every_class_a_kube_error() -> None:
    exc = apierrors.from_status(409, _status(409, "AlreadyExists"))
    assert isinstance(exc, apierrors.Conflict) and isinstance(exc, apierrors.KubeError)


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (404, apierrors.NotFound),
        (409, apierrors.Conflict),
        (502, apierrors.ServerError),
        (418, apierrors.ApiError),
    ],
)
def test_a_body_that_is_no_status_is_typed_by_its_code(code: int, cls: type) -> None:
    exc = apierrors.from_status(code, b"<html>Bad Gateway</html>")
    assert type(exc) is cls
    assert exc.reason == f"HTTP{code}"


def test_the_causes_and_the_details_are_kept() -> None:
    details = {"causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]}
    exc = apierrors.from_status(403, _status(403, "Forbidden", details=details))
    assert exc.causes == {"NamespaceTerminating"}
    assert apierrors.from_status(403, _status(403, "Forbidden")).causes == frozenset()


def test_retry_after_comes_from_the_header_or_the_status_details() -> None:
    header = apierrors.from_status(429, _status(429, "TooManyRequests"), {"Retry-After": "1"})
    assert header.retry_after == 1.0
    body = _status(500, "InternalError", details={"retryAfterSeconds": 2})
    assert apierrors.from_status(500, body).retry_after == 2.0
    assert apierrors.from_status(500, _status(500, "InternalError")).retry_after is None


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("1", 1.0),
        (" 3 ", 3.0),
        ("0.5", 0.5),
        ("0", 0.0),
        (None, None),
        ("", None),
        ("-1", None),
        ("nan", None),
        ("inf", None),
        ("Wed, 21 Oct 2015 07:28:00 GMT", None),
    ],
)
def test_parse_retry_after(value: str | None, seconds: float | None) -> None:
    assert apierrors.parse_retry_after(value) == seconds


POLICY = apierrors.RetryPolicy()


def _failure(code: int, retry_after: str | None = None) -> apierrors.ApiError:
    headers = {"Retry-After": retry_after} if retry_after else {}
    return apierrors.from_status(code, b"", headers)


def test_a_transient_failure_is_retried_within_a_second() -> None:
    for failure in (_failure(500), _failure(503), apierrors.Unreachable("reset")):
        wait = POLICY.delay("POST", failure, 1, 0.0)
        assert wait is not None and 0 < wait <= 0.1


@pytest.mark.parametrize("code", [400, 401, 403, 404, 409, 410, 422, 501])
def test_refusals_are_not_retried(code: int) -> None:
    assert POLICY.delay("GET", _failure(code), 1, 0.0) is None


def test_an_unknown_verb_is_not_retried() -> None:
    assert POLICY.delay("PUT", _failure(503), 1, 0.0) is None


def test_retry_after_is_honoured_up_to_its_cap() -> None:
    assert POLICY.delay("PATCH", _failure(429, "1"), 1, 0.0) == 1.0
    assert POLICY.delay("PATCH", _failure(429, "11"), 1, 0.0) is None
    assert POLICY.delay("PATCH", _failure(429), 1, 0.0) is not None


def test_attempts_and_total_time_are_bounded() -> None:
    assert POLICY.delay("GET", _failure(500), POLICY.attempts, 0.0) is None
    assert POLICY.delay("GET", _failure(429, "2"), 1, POLICY.budget - 1) is None
    assert POLICY.delay("GET", _failure(429, "2"), 1, POLICY.budget - 2) == 2.0


def test_the_backoff_doubles_up_to_its_cap() -> None:
    upper = [POLICY.backoff(n, _Max()) for n in range(1, 10)]
    assert upper == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]


@given(attempt=st.integers(1, 60), seed=st.integers())
def test_the_backoff_is_jittered_within_half_to_all_of_its_step(attempt: int, seed: int) -> None:
    step = min(POLICY.max_delay, POLICY.first_delay * 2.0 ** (attempt - 1))
    wait = POLICY.backoff(attempt, random.Random(seed))
    assert step / 2 <= wait <= step


@given(attempts=st.lists(st.sampled_from([429, 500, 502, 503, 504, 0]), max_size=30))
def test_a_run_of_failures_ends_within_the_budget(attempts: list[int]) -> None:
    elapsed, rng = 0.0, random.Random(0)
    for n, code in enumerate(attempts, start=1):
        failure = apierrors.Unreachable("x") if code == 0 else _failure(code)
        wait = POLICY.delay("GET", failure, n, elapsed, rng)
        if wait is None:
            break
        elapsed += wait
    assert elapsed <= POLICY.budget and n <= POLICY.attempts if attempts else True


class _Max(random.Random):
    def uniform(self, a: float, b: float) -> float:
        return b
