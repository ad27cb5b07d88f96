"""A small in-process Kubernetes API server (aiohttp) for the hop's write-order tests.

It keeps objects in memory under the paths the operator's client uses, answers
create/get/list/merge-patch like the API server (uid and resourceVersion assigned,
409 AlreadyExists, 409 Conflict on a stale ``metadata.resourceVersion``, 404
NotFound), serves a fixed ``pods/log``, and records every write in order.
``fail_at`` makes the n-th write fail with a 403 the client does not retry,
unapplied: the operator's call raises there, as if it had died just before that
write.  ``before_write`` runs before each write is applied (a test checks what must
already be durable).
"""

from __future__ import annotations

import copy
import itertools
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

Obj = dict[str, Any]
LOG = b"the parent's report\n"


@dataclass(frozen=True)
class Write:
    method: str
    kind: str
    name: str
    body: Obj


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge(result.get(key), value)
    return result


def status(code: int, reason: str) -> web.Response:
    body = {"kind": "Status", "status": "Failure", "code": code, "reason": reason}
    return web.json_response(body, status=code)


class FakeApi:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], Obj] = {}
        self.writes: list[Write] = []
        self.reads: list[str] = []  # The kind of every GET (a list or a get).
        self.fail_at: int | None = None
        self.before_write: Callable[[Write], Awaitable[None]] | None = None
        self._versions = itertools.count(100)

    def put(self, kind: str, obj: Obj) -> Obj:
        """Store ``obj`` as if created (uid, resourceVersion, namespace kept)."""
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta["resourceVersion"] = str(next(self._versions))
        meta.setdefault("generation", 1)
        self.objects[(kind, meta["name"])] = obj
        return obj

    def of(self, kind: str) -> list[Obj]:
        return [o for (k, _), o in sorted(self.objects.items()) if k == kind]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        parts = request.path.strip("/").split("/")
        at = parts.index("namespaces") + 2  # .../namespaces/<ns>/<kind>[/<name>[/<sub>]]
        kind, rest = parts[at], parts[at + 1 :]
        name, sub = [*rest, None, None][:2]
        body = await request.json() if request.can_read_body else {}
        if request.method == "GET":
            self.reads.append(kind)
        if request.method in ("POST", "PATCH"):
            named = name or str((body.get("metadata") or {}).get("name", ""))
            write = Write(request.method, f"{kind}/{sub}" if sub else kind, named, body)
            refused = await self._record(write)
            if refused is not None:
                return refused
        if request.method == "POST":
            return self._create(kind, body)
        if request.method == "PATCH":
            return self._patch(kind, str(name), sub, body)
        return self._get(kind, name, sub)

    async def _record(self, write: Write) -> web.Response | None:
        if self.fail_at is not None and len(self.writes) == self.fail_at:
            return status(403, "Forbidden")  # Not retried: the hop stops right here.
        if self.before_write is not None:
            await self.before_write(write)
        self.writes.append(write)
        return None

    def _create(self, kind: str, body: Obj) -> web.Response:
        if (kind, body["metadata"]["name"]) in self.objects:
            return status(409, "AlreadyExists")
        return web.json_response(self.put(kind, copy.deepcopy(body)), status=201)

    def _patch(self, kind: str, name: str, sub: str | None, body: Obj) -> web.Response:
        found = self.objects.get((kind, name))
        if found is None:
            return status(404, "NotFound")
        expected = (body.get("metadata") or {}).get("resourceVersion")
        if expected is not None and expected != found["metadata"]["resourceVersion"]:
            return status(409, "Conflict")  # A precondition, as the API server checks it.
        patched = merge(found, body if sub is None else {"status": body.get("status")})
        return web.json_response(self.put(kind, patched))

    def _get(self, kind: str, name: str | None, sub: str | None) -> web.StreamResponse:
        if sub == "log":
            return web.Response(body=LOG)
        if name is None:
            return web.json_response({"items": self.of(kind), "metadata": {}})
        found = self.objects.get((kind, name))
        return status(404, "NotFound") if found is None else web.json_response(found)
