"""The job API as one job calls it: its own token, its own scope, plain HTTP.

The MCP tools (``mcpserving.py``) run in the agent's pod, so they know only what the
pod is given (:class:`JobEnv`).  Every request carries the job's own token and
nothing else: a tool can do exactly what the job could do with ``curl`` and no
more.  The API decides everything (tenancy, chain scope, seed 000's delegation
rules, who owns an anchor), and its refusals come back as :class:`Refused` carrying
the API's own words, which the tools hand to the model as tool errors.

Path segments (a store namespace, a key) are the caller's text: each is
percent-encoded whole, so a ``/``, ``?`` or ``#`` in a key stays part of the key
and never reaches another route or query parameter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import yarl

Obj = dict[str, Any]
ENV_NAMES = ("AGENT_API_URL", "AGENT_TOKEN", "AGENT_NAMESPACE", "AGENT_JOB", "AGENT_CHAIN_ID")
REQUEST_SECONDS = 30.0
"""A call's own time, on top of any ``?wait=`` the API is asked to hold it open for."""
MAX_WAIT_SECONDS = 300
"""The job API's limit for ``POST /api/jobs?wait=`` (``web/schemas.py``)."""
_EXTRAS = ("reason", "size", "limit", "used", "agents")


class MissingEnvironment(Exception):
    """The pod's environment lacks what the tools need (not run by the operator?)."""


class Refused(Exception):
    """The job API refused the call, or could not be reached; the message says why."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class JobEnv:
    """Who this job is and where its API is, from the pod's environment."""

    api_url: str
    token: str
    namespace: str
    job: str
    chain_id: str

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> JobEnv:
        missing = [name for name in ENV_NAMES if not environ.get(name)]
        if missing:
            raise MissingEnvironment(
                f"{', '.join(missing)} not set: the agentchain tools run inside an agent's pod,"
                " whose AgentJob gives them these variables."
            )
        api_url, token, namespace, job, chain_id = (environ[name] for name in ENV_NAMES)
        return cls(api_url.rstrip("/"), token, namespace, job, chain_id)


def refusal_message(status: int, body: object) -> str:
    """The API's error JSON as one line: ``error: detail`` and its machine-readable extras."""
    if not isinstance(body, dict) or "error" not in body:
        return f"The job API answered HTTP {status}."
    text = str(body["error"])
    if body.get("detail"):
        text += f": {body['detail']}"
    extras = [f"{k} {body[k]}" for k in _EXTRAS if body.get(k) is not None]
    return f"{text} (HTTP {status}{''.join(', ' + e for e in extras)})"


class JobApi:
    """One job's calls to the job API; each raises :class:`Refused` on a non-2xx answer."""

    def __init__(self, env: JobEnv, session: aiohttp.ClientSession) -> None:
        self.env = env
        self._session = session

    def _url(self, *segments: str) -> yarl.URL:
        path = "/".join(quote(s, safe="") for s in segments)
        return yarl.URL(f"{self.env.api_url}/{path}", encoded=True)

    async def _call(
        self,
        method: str,
        url: yarl.URL,
        *,
        query: Mapping[str, str] | None = None,
        body: object = None,
        wait: float = 0,
    ) -> Any:
        if query:
            url = url.with_query(query)
        headers = {"Authorization": f"Bearer {self.env.token}", "Accept": "application/json"}
        timeout = aiohttp.ClientTimeout(total=REQUEST_SECONDS + wait)
        try:
            async with self._session.request(
                method, url, json=body, headers=headers, timeout=timeout
            ) as response:
                text = await response.text()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise Refused(
                f"The job API at {self.env.api_url} did not answer ({type(exc).__name__})."
                " Try again in a moment."
            ) from None
        try:
            data = json.loads(text) if text else None
        except ValueError:
            data = None
        if status >= 400:
            raise Refused(refusal_message(status, data), status)
        return data

    # Jobs and delegation (seed 000).

    async def delegate(self, agent: str, task: str, wait: int) -> Obj:
        query = {"wait": str(wait)} if wait else None
        body = {"agentRole": agent, "task": task}
        answer: Obj = await self._call(
            "POST", self._url("api", "jobs"), query=query, body=body, wait=wait
        )
        return answer

    async def job(self, name: str) -> Obj:
        answer: Obj = await self._call("GET", self._url("api", "jobs", self.env.namespace, name))
        return answer

    # The shared store.

    async def store_get(self, namespace: str, key: str, *, extend: bool = False) -> Obj:
        query = {"extend": "true"} if extend else None
        url = self._url("api", "store", namespace, key)
        answer: Obj = await self._call("GET", url, query=query)
        return answer

    async def store_put(
        self, namespace: str, key: str, value: str, ttl_seconds: int | None = None
    ) -> Obj:
        body: Obj = {"value": value}
        if ttl_seconds is not None:
            body["ttlSeconds"] = ttl_seconds
        answer: Obj = await self._call("PUT", self._url("api", "store", namespace, key), body=body)
        return answer

    async def store_list(self, namespace: str, prefix: str, limit: int) -> Obj:
        query = {"recent": str(limit)}
        if prefix:
            query["prefix"] = prefix
        answer: Obj = await self._call("GET", self._url("api", "store", namespace), query=query)
        return answer

    # Anchors (seed 004).

    async def anchor_get(self, job: str | None = None) -> Obj:
        url = self._url("api", "jobs", self.env.namespace, job or self.env.job, "anchor")
        answer: Obj = await self._call("GET", url)
        return answer

    async def anchor_put(self, anchor: Obj) -> Obj:
        url = self._url("api", "jobs", self.env.namespace, self.env.job, "anchor")
        answer: Obj = await self._call("PUT", url, body=anchor)
        return answer

    async def team_anchor(self) -> Obj:
        url = self._url("api", "chains", self.env.namespace, self.env.chain_id, "anchor")
        answer: Obj = await self._call("GET", url)
        return answer

    async def progress_note(self, note: str) -> Obj:
        url = self._url("api", "jobs", self.env.namespace, self.env.job, "progress")
        answer: Obj = await self._call("PUT", url, body={"note": note})
        return answer

    async def review(self, review: Obj) -> Obj:
        url = self._url("api", "jobs", self.env.namespace, self.env.job, "review")
        answer: Obj = await self._call("PUT", url, body=review)
        return answer

    # GitHub.

    async def github_token(self) -> Obj:
        answer: Obj = await self._call("POST", self._url("api", "github", "token"))
        return answer
