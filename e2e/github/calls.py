"""What a handler gets (a validated call) and gives back (an answer), and the registry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from e2e.github import access, model
from e2e.github.render import Renderer

DEFAULT_PER_PAGE = 30


@dataclass
class Call:
    state: model.State
    render: Renderer
    identity: access.Identity
    params: dict[str, str]
    query: dict[str, list[str]]
    body: Any
    url: str = ""  # the request's URL without its query, for Link headers
    link: str | None = None

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else default

    def int_param(self, name: str) -> int:
        return int(self.params[name])

    def repo(self, permission: str, level: str) -> model.Repo:
        return access.repository(
            self.state, self.identity, self.params["owner"], self.params["repo"], permission, level
        )

    def page(self, items: list[Any]) -> list[Any]:
        """One page of ``items`` (``per_page``/``page``), with GitHub's ``Link`` header."""
        per_page = max(min(int(self.arg("per_page") or DEFAULT_PER_PAGE), 100), 1)
        page = max(int(self.arg("page") or 1), 1)
        last = max((len(items) + per_page - 1) // per_page, 1)
        links = {"prev": page - 1, "first": 1} if page > 1 else {}
        if page < last:
            links.update(next=page + 1, last=last)
        if links:
            self.link = ", ".join(f'<{self._url(n)}>; rel="{rel}"' for rel, n in links.items())
        return items[(page - 1) * per_page : page * per_page]

    def _url(self, page: int) -> str:
        query = {k: v[-1] for k, v in self.query.items()} | {"page": str(page)}
        return f"{self.url}?{urlencode(query)}"


@dataclass
class Answer:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Call], Answer]
HANDLERS: dict[str, Handler] = {}


def handles(operation_id: str) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        HANDLERS[operation_id] = handler
        return handler

    return register
