"""``ModelStandIn``: a scripted model server speaking the providers' HTTP APIs.

Routes: ``POST /v1/messages`` (Anthropic Messages, ``?beta=true`` as Claude Code sends
it; streamed or not), ``POST /v1/responses`` (OpenAI Responses, streamed, as ``codex
exec`` uses it with ``wire_api = "responses"``), ``POST /v1/chat/completions``
(streamed or not) and ``POST /v1beta/models/{model}:streamGenerateContent`` (the Gemini
API, streamed as server-sent events, as Gemini CLI uses it with
``GOOGLE_GEMINI_BASE_URL``; ``/v1/`` too, as the ``google-genai`` client calls it). Each
model request takes the next scripted answer (``script``), or the standing one
(``always``) when the queue is empty.

Each API key has a script of its own: ``script(..., key=K)`` and ``always(..., key=K)``
also make the stand-in accept ``K``, and a request with ``K`` takes only ``K``'s answers.
So jobs running at once, each with its own key, get their own answers whatever order
their requests come in (``Exchange.key`` says whose a request was).

Every request is checked against the official SDK's parameter type and every body or
event the stand-in sends against the SDK's response type (``validation.py``). A request
off the type gets the provider's 400 and is a violation; so is an answer the stand-in
built wrong, a request with no answer scripted, and a route it does not know. The
``model_standin`` fixture fails its test at teardown on any violation.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web

from e2e.github.threaded import ThreadedSite
from e2e.models import wire
from e2e.models.script import Answer, Failure, Reply
from e2e.models.validation import problems

Json = dict[str, Any]
DEFAULT_API_KEY = "sk-standin-key"
# Reachability probes Claude Code sends before its first request: answered, not modelled.
_PROBES = ("/", "/api/hello")


@dataclass
class Exchange:
    """One request the stand-in answered: which API, what came in, what went out."""

    api: str  # "anthropic", "responses", "chat", "gemini"
    path: str
    query: str
    headers: dict[str, str]
    body: Json
    key: str = ""  # the API key it came with (a test's key: the stand-in has no other)
    status: int = 0
    answer: Answer | None = None
    sent: list[Json] = field(default_factory=list)  # the body, or the stream's events
    # time.monotonic() when the request came in (a benchmark's "first model request").
    received: float = field(default_factory=time.monotonic)


class ModelStandIn:
    def __init__(self, api_key: str = DEFAULT_API_KEY, host: str = "127.0.0.1") -> None:
        """``host``: where it listens; pods on the real node reach only its bridge address."""
        self.api_key = api_key
        self._lock = threading.Lock()
        # API key -> its queue and its standing answer; the default key's is always here.
        self._queues: dict[str, deque[Answer]] = {api_key: deque()}
        self._standing: dict[str, Answer | None] = {api_key: None}
        self._exchanges: list[Exchange] = []
        self._violations: list[str] = []
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_post("/v1/responses", self._responses)
        app.router.add_post("/v1/chat/completions", self._chat)
        # Gemini CLI calls v1beta, the google-genai client v1.
        app.router.add_post("/v1beta/models/{call}", self._gemini)
        app.router.add_post("/v1/models/{call}", self._gemini)
        app.router.add_route("*", "/{tail:.*}", self._unknown)
        self._site = ThreadedSite(app, "model-standin", host=host)

    # -- the test's side -------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self._site.host}:{self._site.port}"

    def script(self, *answers: Answer, key: str | None = None) -> None:
        """Answer the next model requests with these, in order; with ``key``, the next
        requests made with that API key (which the stand-in then accepts)."""
        with self._lock:
            self._queues.setdefault(key or self.api_key, deque()).extend(answers)
            self._standing.setdefault(key or self.api_key, None)

    def always(self, answer: Answer | None, key: str | None = None) -> None:
        """Answer with this whenever the queue is empty (``None``: nothing is scripted);
        with ``key``, that API key's queue (which the stand-in then accepts)."""
        with self._lock:
            self._queues.setdefault(key or self.api_key, deque())
            self._standing[key or self.api_key] = answer

    def exchanges(self, api: str | None = None, key: str | None = None) -> list[Exchange]:
        """What was asked, in order; of one API, and of one API key."""
        with self._lock:
            return [
                e
                for e in self._exchanges
                if (api is None or e.api == api) and (key is None or e.key == key)
            ]

    @property
    def violations(self) -> list[str]:
        with self._lock:
            return list(self._violations)

    def take_violations(self) -> list[str]:
        with self._lock:
            taken, self._violations = self._violations, []
            return taken

    def assert_clean(self) -> None:
        found = self.violations
        assert not found, "model stand-in violations:\n" + "\n".join(found)

    def __enter__(self) -> ModelStandIn:
        self._site.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._site.stop()

    # -- the HTTP side ---------------------------------------------------------------

    def _violation(self, text: str) -> None:
        with self._lock:
            self._violations.append(text)

    def _next(self, key: str) -> Answer | None:
        with self._lock:
            queue = self._queues[key]
            return queue.popleft() if queue else self._standing[key]

    def _check(self, kind: str, value: Json, where: str) -> None:
        found = problems(kind, value)
        if found:
            self._violation(f"{where}: off the SDK's {kind}: " + "; ".join(found))

    async def _unknown(self, request: web.Request) -> web.StreamResponse:
        if request.method in ("HEAD", "GET") and request.path in _PROBES:
            return web.Response(status=200)
        self._violation(f"unknown-route: {request.method} {request.path_qs}")
        return web.json_response({"error": {"message": "no such route"}}, status=404)

    async def _begin(self, request: web.Request, api: str) -> tuple[Exchange, Json | None]:
        """Record the request; its body, or None when it is not JSON (a violation)."""
        raw = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() != "authorization"}
        exchange = Exchange(api, request.path, request.query_string, headers, {})
        exchange.key = self._key_of(request)
        with self._lock:
            self._exchanges.append(exchange)
        try:
            body = json.loads(raw)
        except ValueError:
            self._violation(f"request: {api} {request.path}: body is not JSON")
            return exchange, None
        if not isinstance(body, dict):
            self._violation(f"request: {api} {request.path}: body is not an object")
            return exchange, None
        exchange.body = body
        return exchange, body

    @staticmethod
    def _key_of(request: web.Request) -> str:
        given = request.headers.get("x-api-key") or request.headers.get("x-goog-api-key") or ""
        bearer = request.headers.get("Authorization", "")
        if bearer.startswith("Bearer "):
            given = given or bearer.removeprefix("Bearer ")
        return given

    def _authorized(self, key: str) -> bool:
        with self._lock:
            known = list(self._queues)
        return any(secrets.compare_digest(key.encode(), k.encode()) for k in known)

    def _answer(
        self, request: web.Request, exchange: Exchange, body: Json | None, request_kind: str
    ) -> Answer:
        """What to send: a 400 for a bad request, a 401 for a bad key, else the script."""
        if body is None:
            return Failure(400, "The request body is not valid JSON.", None)
        found = problems(request_kind, body)
        if found:
            self._violation(
                f"request: {request.path}: off the SDK's {request_kind}: " + "; ".join(found)
            )
            return Failure(400, "; ".join(found)[:500], None)
        if not self._authorized(exchange.key):
            return Failure(401, "invalid x-api-key", None)
        answer = self._next(exchange.key)
        if answer is None:
            self._violation(f"unscripted: {request.path}: no answer was scripted")
            return Failure(500, "the stand-in has no scripted answer", None)
        exchange.answer = answer
        return answer

    async def _fail(
        self, exchange: Exchange, failure: Failure, error_body: Json, error_kind: str, checked: Json
    ) -> web.Response:
        self._check(error_kind, checked, f"response: {exchange.path} {failure.status}")
        exchange.status, exchange.sent = failure.status, [error_body]
        headers = {} if failure.retry_after is None else {"retry-after": f"{failure.retry_after:g}"}
        return web.json_response(error_body, status=failure.status, headers=headers)

    async def _stream(
        self,
        request: web.Request,
        exchange: Exchange,
        events: list[Json],
        kind: str,
        line: Callable[[Json], str],
        end: str = "",
    ) -> web.StreamResponse:
        for event in events:
            self._check(kind, event, f"response: {exchange.path} event {event.get('type')}")
        exchange.status, exchange.sent = 200, events
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        for event in events:
            await response.write(line(event).encode())
        if end:
            await response.write(end.encode())
        await response.write_eof()
        return response

    @staticmethod
    def _ids(reply: Reply, prefix: str) -> list[str]:
        return [c.call_id or f"{prefix}{secrets.token_hex(8)}" for c in reply.tool_calls]

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        exchange, body = await self._begin(request, "anthropic")
        answer = self._answer(request, exchange, body, "anthropic.request")
        if isinstance(answer, Failure):
            error = wire.anthropic_error(answer)
            return await self._fail(exchange, answer, error, "anthropic.error", error)
        assert body is not None
        model, ids = str(body.get("model", "")), self._ids(answer, "toolu_")
        message_id = f"msg_{secrets.token_hex(12)}"
        if not body.get("stream"):
            message = wire.anthropic_message(answer, model, message_id, ids)
            self._check("anthropic.message", message, f"response: {exchange.path}")
            exchange.status, exchange.sent = 200, [message]
            return web.json_response(message)
        events = wire.anthropic_events(answer, model, message_id, ids)
        return await self._stream(
            request,
            exchange,
            events,
            "anthropic.event",
            lambda e: f"event: {e['type']}\ndata: {json.dumps(e)}\n\n",
        )

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        exchange, body = await self._begin(request, "responses")
        answer = self._answer(request, exchange, body, "responses.request")
        if isinstance(answer, Failure):
            error = wire.openai_error(answer)
            return await self._fail(exchange, answer, error, "openai.error", error["error"])
        assert body is not None
        if not body.get("stream"):
            self._violation(f"unimplemented: {exchange.path} without stream")
            return web.json_response(wire.openai_error(Failure(400, "stream only")), status=400)
        response_id = f"resp_{secrets.token_hex(12)}"
        events = wire.responses_events(
            answer, str(body.get("model", "")), response_id, self._ids(answer, "call_")
        )
        return await self._stream(
            request,
            exchange,
            events,
            "responses.event",
            lambda e: f"event: {e['type']}\ndata: {json.dumps(e)}\n\n",
        )

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        exchange, body = await self._begin(request, "chat")
        answer = self._answer(request, exchange, body, "chat.request")
        if isinstance(answer, Failure):
            error = wire.openai_error(answer)
            return await self._fail(exchange, answer, error, "openai.error", error["error"])
        assert body is not None
        model, ids = str(body.get("model", "")), self._ids(answer, "call_")
        completion_id = f"chatcmpl-{secrets.token_hex(12)}"
        if not body.get("stream"):
            completion = wire.chat_completion(answer, model, completion_id, ids)
            self._check("chat.completion", completion, f"response: {exchange.path}")
            exchange.status, exchange.sent = 200, [completion]
            return web.json_response(completion)
        options = body.get("stream_options") or {}
        usage = bool(isinstance(options, dict) and options.get("include_usage"))
        chunks = wire.chat_chunks(answer, model, completion_id, ids, usage)
        return await self._stream(
            request,
            exchange,
            chunks,
            "chat.chunk",
            lambda e: f"data: {json.dumps(e)}\n\n",
            end="data: [DONE]\n\n",
        )

    async def _gemini(self, request: web.Request) -> web.StreamResponse:
        model, _, method = request.match_info["call"].partition(":")
        if method != "streamGenerateContent":
            return await self._unknown(request)
        exchange, body = await self._begin(request, "gemini")
        answer = self._answer(request, exchange, body, "gemini.request")
        if isinstance(answer, Failure):
            error = wire.gemini_error(answer)
            return await self._fail(exchange, answer, error, "gemini.error", error)
        chunks = wire.gemini_chunks(answer, model, f"resp-{secrets.token_hex(8)}")
        return await self._stream(
            request, exchange, chunks, "gemini.chunk", lambda e: f"data: {json.dumps(e)}\n\n"
        )
