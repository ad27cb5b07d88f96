"""The HTTP side of the stand-in: one aiohttp handler that runs every request through
GitHub's description, the fault plan, authentication, the stateful handlers and, on the
way out, the description's response schema, recording all of it.

Order of checks, as GitHub answers: unknown route → 404; injected fault; credentials
(401); the request against the description (422, 400 for unparsable JSON, 404 for a path
parameter of the wrong type); then the handler's own refusals (403/404/422). A request
off the description is recorded as a violation even when something earlier refused it,
because the client would have sent it to GitHub just the same.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from aiohttp import web

from e2e.github import access, handlers_apps, handlers_repos, handlers_reviews, model
from e2e.github.calls import HANDLERS, Answer, Call
from e2e.github.faults import DOCS, Fault, Faults
from e2e.github.recording import HEADERS_OF_INTEREST, Exchange, Recording, Violation
from e2e.github.render import Renderer
from e2e.github.spec import BASE_API_VERSION, Operation, Spec

CONTROL_PREFIX = "/_standin/"
_ = (handlers_apps, handlers_repos, handlers_reviews)  # imported for their @handles registrations


class StandInBug(AssertionError):
    """The stand-in built an answer the description does not allow."""


def error_body(message: str, status: int, **extra: Any) -> dict[str, Any]:
    return {"message": message, "documentation_url": DOCS, "status": str(status), **extra}


class Dispatcher:
    def __init__(
        self, spec: Spec, state: model.State, faults: Faults, recording: Recording, prefix: str = ""
    ) -> None:
        self.spec, self.state, self.faults, self.recording = spec, state, faults, recording
        self.prefix = prefix.rstrip("/")
        self.render: Renderer | None = None  # set once the port is known

    def app(self) -> web.Application:
        application = web.Application(client_max_size=32 * 1024 * 1024)
        application.router.add_route("*", "/{tail:.*}", self.handle)
        return application

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path.startswith(CONTROL_PREFIX):
            return await self._control(request, path.removeprefix(CONTROL_PREFIX))
        raw = await request.read()
        exchange = Exchange(
            request.method,
            path,
            {k: request.query.getall(k) for k in request.query.keys()},
            {h: request.headers[h] for h in HEADERS_OF_INTEREST if h in request.headers},
            _parse(raw),
            "anonymous",
        )
        try:
            answer = self._dispatch(request, exchange, raw)
        except Exception as bug:  # a stand-in bug must fail the test, not hang the client
            exchange.violations.append(
                Violation("response", exchange.method, path, exchange.operation_id, [repr(bug)])
            )
            answer = Answer(500, error_body(f"stand-in bug: {bug!r}", 500))
            exchange.status, exchange.response = answer.status, answer.body
        finally:
            self.recording.add(exchange)
        return web.Response(
            status=answer.status,
            headers=answer.headers,
            body=None if answer.body is None else json.dumps(answer.body),
            content_type=None if answer.body is None else "application/json",
        )

    def _dispatch(self, request: web.Request, exchange: Exchange, raw: bytes) -> Answer:
        path = exchange.path
        if self.prefix and not path.startswith(self.prefix + "/"):
            return self._unknown(exchange)
        found = self.spec.match(request.method, path.removeprefix(self.prefix))
        if found is None:
            return self._unknown(exchange)
        op, params = found
        exchange.operation_id = op.operation_id
        refused = self._check_version(exchange, op, request.headers.get("X-GitHub-Api-Version"))
        if refused is not None:
            return refused
        problems = self._problems(op, params, exchange, raw)
        fault = self.faults.take(request.method, path, op.template, op.operation_id)
        if fault is not None:
            exchange.fault = fault.kind
            status, body, headers = fault.answer(model.RATE_LIMIT)
            return self._finish(exchange, op, Answer(status, body, headers), validate=False)
        with self.state.lock:
            answer = self._answer(request, exchange, op, params, problems)
        return self._finish(exchange, op, answer, validate=True)

    def _check_version(self, exchange: Exchange, op: Operation, asked: str | None) -> Answer | None:
        """GitHub refuses an API version it does not have with 400; the rest is recorded."""
        exchange.api_version = asked or BASE_API_VERSION
        if exchange.api_version in self.spec.api_versions:
            return None
        known = sorted(self.spec.api_versions)
        problem = f"X-GitHub-Api-Version {asked!r} is not one of {known}"
        exchange.violations.append(
            Violation("request", exchange.method, exchange.path, op.operation_id, [problem])
        )
        message = f"API version {asked} is not supported."
        return self._finish(exchange, op, Answer(400, error_body(message, 400)), validate=False)

    def _problems(
        self, op: Operation, params: dict[str, str], exchange: Exchange, raw: bytes
    ) -> list[tuple[str, str]]:
        if raw.strip() and exchange.body is _UNPARSABLE:
            exchange.body = raw.decode(errors="replace")
            problems = [("body", "Problems parsing JSON")]
        else:
            found = self.spec.check_request(op, params, exchange.query, exchange.body)
            problems = [(p.where, p.message) for p in found]
        if problems:
            exchange.violations.append(
                Violation(
                    "request",
                    exchange.method,
                    exchange.path,
                    op.operation_id,
                    [f"{where}: {message}" for where, message in problems],
                )
            )
        return problems

    def _answer(
        self,
        request: web.Request,
        exchange: Exchange,
        op: Operation,
        params: dict[str, str],
        problems: list[tuple[str, str]],
    ) -> Answer:
        try:
            identity = access.identify(self.state, request.headers.get("Authorization"))
            exchange.identity = str(identity)
            if problems:
                return _refusal(problems)
            handler = HANDLERS.get(op.operation_id)
            if handler is None:
                exchange.violations.append(
                    Violation(
                        "unimplemented",
                        exchange.method,
                        exchange.path,
                        op.operation_id,
                        ["GitHub has this operation; the stand-in does not implement it"],
                    )
                )
                return Answer(501, error_body("Not implemented by the stand-in", 501))
            assert self.render is not None
            call = Call(
                self.state,
                self.render,
                identity,
                params,
                exchange.query,
                exchange.body,
                url=str(request.url.with_query(None)),
            )
            answer = handler(call)
            if call.link is not None:
                answer.headers.setdefault("Link", call.link)
            return answer
        except model.Refused as refused:
            return Answer(
                refused.status, error_body(refused.message, refused.status, **refused.extra)
            )

    def _finish(self, exchange: Exchange, op: Operation, answer: Answer, validate: bool) -> Answer:
        if validate and (answer.status < 400 or op.response_schema(answer.status)):
            wrong = self.spec.check_response(op, answer.status, answer.body)
            if wrong:
                exchange.violations.append(
                    Violation("response", exchange.method, exchange.path, op.operation_id, wrong)
                )
                answer = Answer(500, error_body("stand-in bug: " + wrong[0], 500))
        answer.headers = {**self._standard_headers(exchange), **answer.headers}
        exchange.status, exchange.response = answer.status, answer.body
        exchange.response_headers = dict(answer.headers)
        return answer

    def _standard_headers(self, exchange: Exchange) -> dict[str, str]:
        limit, remaining, reset = self.state.spend(exchange.identity)
        return {
            "X-GitHub-Api-Version-Selected": exchange.api_version,
            "X-GitHub-Request-Id": uuid.uuid4().hex[:20].upper(),
            "X-RateLimit-Limit": str(limit), "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": str(reset), "X-RateLimit-Used": str(limit - remaining),
            "X-RateLimit-Resource": "core",
        }  # fmt: skip

    def _unknown(self, exchange: Exchange) -> Answer:
        exchange.violations.append(
            Violation(
                "unknown-route",
                exchange.method,
                exchange.path,
                None,
                ["no operation of GitHub's description matches this method and path"],
            )
        )
        exchange.status, exchange.response = 404, error_body("Not Found", 404)
        return Answer(404, exchange.response)

    async def _control(self, request: web.Request, what: str) -> web.Response:
        if what == "faults" and request.method == "POST":
            try:
                self.faults.add(Fault(**await request.json()))
            except (TypeError, ValueError) as bad:
                return web.json_response({"message": str(bad)}, status=400)
            return web.json_response({"pending": len(self.faults.pending)}, status=201)
        if what == "faults" and request.method == "DELETE":
            self.faults.clear()
            return web.Response(status=204)
        if what == "requests" and request.method == "GET":
            return web.json_response(
                [e.as_json() for e in self.recording.exchanges()],
                dumps=lambda v: json.dumps(v, default=str),
            )
        if what.startswith("logs/") and request.method == "GET":  # A job log's "signed URL".
            full_name, _, job_id = what.removeprefix("logs/").rpartition("/")
            with self.state.lock:
                found = self.state.job_logs.get((full_name, int(job_id) if job_id.isdigit() else 0))
            if found is not None:
                return web.Response(body=found, content_type="text/plain")
        if what == "violations" and request.method == "GET":
            return web.json_response([str(v) for v in self.recording.violations])
        return web.json_response({"message": "Not Found"}, status=404)


class _Unparsable:
    def __repr__(self) -> str:
        return "<unparsable JSON>"


_UNPARSABLE: Any = _Unparsable()


def _parse(raw: bytes) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return _UNPARSABLE


def _refusal(problems: list[tuple[str, str]]) -> Answer:
    if any(message == "Problems parsing JSON" for _, message in problems):
        return Answer(400, error_body("Problems parsing JSON", 400))
    if any(where == "path" for where, _ in problems):
        return Answer(404, error_body("Not Found", 404))
    detail = "\n".join(f"For '{where}', {message}" for where, message in problems)
    return Answer(422, error_body(f"Invalid request.\n\n{detail}", 422))
