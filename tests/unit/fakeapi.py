"""A small in-process Kubernetes API server (aiohttp) for the hop's write-order tests.

It keeps objects in memory under the paths the operator's client uses, answers
create/get/list/merge-patch/delete like the API server (uid and resourceVersion
assigned; a list honours equality and existence label selectors, pages by ``limit``
and ``continue``, and is recorded with its query in ``lists``; 409 AlreadyExists, 409
Conflict on a stale ``metadata.resourceVersion``, 404 NotFound), serves a fixed
``pods/log``, and records every write in order (a delete is a write too).
``fail_at`` makes the n-th write fail with a 403 the client does not retry,
unapplied: the operator's call raises there, as if it had died just before that
write.  ``before_write`` runs before each write is applied (a test checks what must
already be durable).  ``before_request`` runs first on every request, a read too:
a race test pauses requests there to vary how concurrent callers interleave.
``on_change`` hears of every change a request or :meth:`update` and :meth:`remove`
make (``ADDED``, ``MODIFIED``, ``DELETED`` and the object), in order: a test's watch.
"""

from __future__ import annotations

import copy
import itertools
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from agentchain.store import sealing
from agentchain.store.signing import OperatorKeys

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


def selects(term: str, labels: dict[str, str]) -> bool:
    """One term of a label selector: ``k=v``, ``k==v``, ``k!=v``, ``k`` or ``!k``."""
    if "!=" in term:
        key, value = term.split("!=", 1)
        return labels.get(key.strip()) != value.strip()
    if "=" in term:
        key, value = term.replace("==", "=").split("=", 1)
        return labels.get(key.strip()) == value.strip()
    if term.startswith("!"):
        return term[1:].strip() not in labels
    return term in labels


class FakeApi:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], Obj] = {}
        self.writes: list[Write] = []
        self.reads: list[str] = []  # The kind of every GET (a list or a get).
        self.logs: list[str] = []  # The pod of every ``pods/log`` read.
        self.lists: list[tuple[str, dict[str, str]]] = []  # Each list: kind, query.
        self.fail_at: int | None = None
        self.before_write: Callable[[Write], Awaitable[None]] | None = None
        self.before_request: Callable[[str, str, str | None], Awaitable[None]] | None = None
        self.on_change: Callable[[str, str, Obj], None] | None = None
        self._versions = itertools.count(100)

    def put(self, kind: str, obj: Obj) -> Obj:
        """Store ``obj`` as if created (uid, resourceVersion, namespace kept)."""
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta["resourceVersion"] = str(next(self._versions))
        meta.setdefault("generation", 1)
        self.objects[(kind, meta["name"])] = obj
        return obj

    def update(self, kind: str, name: str, patch: Obj) -> Obj | None:
        """Merge ``patch`` into a stored object, as another controller would (heard)."""
        found = self.objects.get((kind, name))
        if found is None:
            return None
        return self._changed("MODIFIED", kind, self.put(kind, merge(found, patch)))

    def remove(self, kind: str, name: str) -> Obj | None:
        """Delete a stored object, as another controller would (heard)."""
        found = self.objects.pop((kind, name), None)
        return None if found is None else self._changed("DELETED", kind, found)

    def _changed(self, event: str, kind: str, obj: Obj) -> Obj:
        if self.on_change is not None:
            self.on_change(event, kind, copy.deepcopy(obj))
        return obj

    def of(self, kind: str) -> list[Obj]:
        return [o for (k, _), o in sorted(self.objects.items()) if k == kind]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        parts = request.path.strip("/").split("/")
        at = parts.index("namespaces") + 2  # .../namespaces/<ns>/<kind>[/<name>[/<sub>]]
        kind, rest = parts[at], parts[at + 1 :]
        name, sub = [*rest, None, None][:2]
        if self.before_request is not None:
            await self.before_request(request.method, kind, name)
        body = await request.json() if request.can_read_body else {}
        if request.method == "GET":
            self.reads.append(kind)
        if request.method in ("POST", "PATCH", "DELETE"):
            named = name or str((body.get("metadata") or {}).get("name", ""))
            write = Write(request.method, f"{kind}/{sub}" if sub else kind, named, body)
            refused = await self._record(write)
            if refused is not None:
                return refused
        if request.method == "POST":
            return self._create(kind, body)
        if request.method == "PATCH":
            return self._patch(kind, str(name), sub, body)
        if request.method == "DELETE":
            return self._delete(kind, str(name))
        if request.method == "GET" and name is None:
            return self._list(kind, dict(request.query))
        return self._get(kind, str(name), sub)

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
        created = self._changed("ADDED", kind, self.put(kind, copy.deepcopy(body)))
        return web.json_response(created, status=201)

    def _patch(self, kind: str, name: str, sub: str | None, body: Obj) -> web.Response:
        found = self.objects.get((kind, name))
        if found is None:
            return status(404, "NotFound")
        expected = (body.get("metadata") or {}).get("resourceVersion")
        if expected is not None and expected != found["metadata"]["resourceVersion"]:
            return status(409, "Conflict")  # A precondition, as the API server checks it.
        patched = merge(found, body if sub is None else {"status": body.get("status")})
        return web.json_response(self._changed("MODIFIED", kind, self.put(kind, patched)))

    def _delete(self, kind: str, name: str) -> web.Response:
        found = self.remove(kind, name)
        return status(404, "NotFound") if found is None else web.json_response(found)

    def _list(self, kind: str, query: dict[str, str]) -> web.Response:
        """A list, as the API server pages it: equality label selectors, ``limit``, and a
        ``continue`` token (here the offset of the next page)."""
        self.lists.append((kind, query))
        terms = [t.strip() for t in query.get("labelSelector", "").split(",") if t.strip()]
        items = [
            o
            for o in self.of(kind)
            if all(selects(term, o["metadata"].get("labels") or {}) for term in terms)
        ]
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0) or len(items)
        page, rest = items[start : start + limit], items[start + limit :]
        metadata = {"continue": str(start + limit)} if rest else {}
        return web.json_response({"items": page, "metadata": metadata})

    def _get(self, kind: str, name: str, sub: str | None) -> web.StreamResponse:
        if sub == "log":
            self.logs.append(name)
            return web.Response(body=LOG)
        found = self.objects.get((kind, name))
        return status(404, "NotFound") if found is None else web.json_response(found)


OPERATOR_KEY = "k" * 64
"""The operator key of the engine tests' settings."""


def sealed(obj: Obj, key: str = OPERATOR_KEY) -> Obj:
    """``obj``, an AgentJob, as the operator writes one: under its seal (``store.sealing``)."""
    return sealing.seal_job(OperatorKeys([key]), obj)
