"""``agentchain mcp``: the seeds' agent features as MCP tools, served over stdio.

An agent's CLI (Claude Code, Codex, ...) starts this server as a subprocess and
offers its tools to the model.  The server is a thin translation: each tool is one
call of the job API (``toolcalls.py``) with the job's own token, so the model gains
no authority the job does not already have, and the rules stay where they are
enforced (the API).  A refusal is anticipated, not a crash: it becomes a tool error
(``ToolError``) whose text is the API's own message, which the model reads and can
act on ("Agent 'x' already in delegation chain", "too large: ... (HTTP 413, size
2300, limit 2048)").

The tool descriptions are the only manual the model gets, so each says what the
tool is for, when to use it, what it returns and which refusals to expect.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Literal, ParamSpec, Protocol

import aiohttp
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from agentchain.runtimes.inpod import toolcalls, toolspans

Obj = dict[str, Any]
P = ParamSpec("P")
SERVER_NAME = "agentchain"
JOB_FIELDS = (
    "id",
    "agentRole",
    "status",
    "terminal",
    "created",
    "reason",
    "message",
    "result",
    "resultTruncated",
    "chainId",
    "chainDepth",
    "parentJobId",
)
INSTRUCTIONS = (
    "You run as one job of an agentchain chain: a Kubernetes AgentJob working with other "
    "agents of your team. These tools reach the operator's job API with your job's own "
    "token: delegate a task to another agent, share knowledge through the team's store, "
    "keep your anchor (a short note of where you are, restored after a context reset) "
    "current, read the team anchor, show progress on the chain's GitHub comment, review "
    "the chain's pull request, and get a fresh GitHub token. An error from a tool is "
    "the operator's refusal, in its own words: read it, it says what to change."
)

# Hints for the client (a CLI may ask before a write): every write replaces or adds, and
# repeating one changes nothing more; only the GitHub tools reach beyond the operator.
READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
GITHUB = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)

StoreNamespace = Annotated[
    str,
    Field(
        min_length=1,
        max_length=128,
        description="The store namespace: a free-form label that groups entries, such as "
        "'performance' or 'memory:coder'.",
    ),
]
StoreKey = Annotated[
    str, Field(min_length=1, max_length=512, description="The entry's key within the namespace.")
]
StoreValue = Annotated[
    str,
    Field(description="The text to store (at most 256 KiB). Store JSON as a string."),
]


class ReviewComment(BaseModel):
    """A review comment on lines of the pull request's diff."""

    path: str = Field(min_length=1, description="The file's path in the repository.")
    line: int = Field(gt=0, description="The (last) line the comment is on.")
    side: Literal["RIGHT", "LEFT"] = Field(
        default="RIGHT", description="RIGHT: the line in the new file; LEFT: in the old one."
    )
    start_line: int | None = Field(
        default=None, gt=0, description="For a comment on several lines: the first (before line)."
    )
    body: str = Field(min_length=1, description="The comment (Markdown).")


class Wrap(Protocol):
    def __call__(self, call: Callable[P, Awaitable[Obj]]) -> Callable[P, Awaitable[Obj]]: ...


def _tool_calls(tracing: toolspans.ToolTracing) -> Wrap:
    """What every tool call goes through: its span (when the job is traced), and the
    API's refusal as a tool error the model reads, not a crash it never sees."""

    def wrap(call: Callable[P, Awaitable[Obj]]) -> Callable[P, Awaitable[Obj]]:
        @functools.wraps(call)
        async def wrapped(*args: P.args, **kwargs: P.kwargs) -> Obj:
            try:
                answer: Obj = await tracing.call(call.__name__, lambda: call(*args, **kwargs))
            except toolcalls.Refused as exc:
                raise ToolError(str(exc)) from None
            return answer

        return wrapped

    return wrap


def _job_view(answer: Mapping[str, Any]) -> Obj:
    """What a model needs of a job: who, how it stands, and its answer."""
    return {k: answer[k] for k in JOB_FIELDS if k in answer}


def build_server(api: toolcalls.JobApi, tracing: toolspans.ToolTracing | None = None) -> MCPServer:
    server: MCPServer = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")
    calls = _tool_calls(tracing or toolspans.ToolTracing({}))
    _add_job_tools(server, api, calls)
    _add_store_tools(server, api, calls)
    _add_anchor_tools(server, api, calls)
    _add_github_tools(server, api, calls)
    return server


def _add_job_tools(server: MCPServer, api: toolcalls.JobApi, calls: Wrap) -> None:
    @server.tool(annotations=WRITES)
    @calls
    async def delegate(
        agent: Annotated[
            str,
            Field(
                min_length=1,
                max_length=63,
                description="The triggerName of the agent to hand the task to.",
            ),
        ],
        task: Annotated[
            str,
            Field(
                min_length=1,
                max_length=64 * 1024,
                description="The other agent's whole prompt: what you need, the context it "
                "cannot see, and what its answer must contain.",
            ),
        ],
        wait_seconds: Annotated[
            int,
            Field(
                ge=0,
                le=toolcalls.MAX_WAIT_SECONDS,
                description="Wait up to this many seconds for the delegated job to end and "
                "return its result; 0 returns at once.",
            ),
        ] = 0,
    ) -> Obj:
        """Hand a task to another agent of your team, as a new job of your chain.

        Use it when part of your work belongs to another agent's role. The operator
        enforces the rules, so a refused delegation is an error naming the rule: an agent
        already in your delegation chain cannot be asked again (no loops, direct or
        indirect), a delegation chain holds at most 3 steps, the chain has a job limit,
        and the target must accept delegations from your agent.

        Returns the delegated job: `id`, `status` (pending, running, completed, failed,
        ...), `terminal`, and once it ended `result` (the last 4,000 characters of its
        output) with `reason` and `message`. With wait_seconds the call returns when
        the job ends or the wait runs out (then `terminal` is false: check it later
        with job_status). Asking the same agent again returns that same job, never a
        second one; the task text of a repeated call is not used.
        """
        return _job_view(await api.delegate(agent, task, wait_seconds))

    @server.tool(annotations=READS)
    @calls
    async def job_status(
        job_id: Annotated[
            str,
            Field(
                min_length=1,
                max_length=253,
                description="The job's id, as delegate returned it.",
            ),
        ],
    ) -> Obj:
        """The current state of a job of your chain, such as one you delegated to.

        Returns `id`, `agentRole`, `status`, `reason`, `message` and, once it ended,
        `result` (the last 4,000 characters of its output). Jobs of other chains are
        refused.
        """
        return _job_view(await api.job(job_id))


def _add_store_tools(server: MCPServer, api: toolcalls.JobApi, calls: Wrap) -> None:
    @server.tool(annotations=READS)
    @calls
    async def store_get(namespace: StoreNamespace, key: StoreKey) -> Obj:
        """Read one entry of your team's shared store.

        The store holds what agents of your Kubernetes namespace learned and chose to
        share. Returns the entry: `value`, `writer` (the job that wrote it), and
        `created`, `updated` and `expiresAt` as Unix times in seconds (`expiresAt` is
        null when it never expires). An absent or expired entry is an 'entry not
        found' error. Reading does not extend the entry's life: store_touch does.
        """
        return await api.store_get(namespace, key)

    @server.tool(annotations=WRITES)
    @calls
    async def store_set(
        namespace: StoreNamespace,
        key: StoreKey,
        value: StoreValue,
        ttl_seconds: Annotated[
            int,
            Field(
                ge=1,
                le=10 * 365 * 24 * 3600,
                description="The entry expires exactly this many seconds from now.",
            ),
        ],
    ) -> Obj:
        """Write an entry of the shared store that expires after a time you choose.

        For what is only true for a while (a lock note, the state of a task, a result
        of today's run). It replaces the entry's value and its expiry, so an update
        never keeps a stale one. For lasting knowledge use store_set_and_extend.
        Returns the stored entry. Refusals: a value over 256 KiB, a full store quota
        for your namespace, an empty or overlong key.
        """
        return await api.store_put(namespace, key, value, ttl_seconds)

    @server.tool(annotations=WRITES)
    @calls
    async def store_set_and_extend(
        namespace: StoreNamespace, key: StoreKey, value: StoreValue
    ) -> Obj:
        """Write lasting knowledge to the shared store: it lives 90 days from now.

        For what other agents should find later (a convention of the code base, a
        pitfall, where something lives). An existing entry's expiry is pushed out to
        90 days from now, never shortened. Returns the stored entry. Refusals: a value
        over 256 KiB, a full store quota for your namespace, an empty or overlong key.
        """
        return await api.store_put(namespace, key, value)

    @server.tool(annotations=WRITES)
    @calls
    async def store_touch(namespace: StoreNamespace, key: StoreKey) -> Obj:
        """Read an entry of the shared store and extend its life by 90 days.

        Use it for knowledge you found useful, so that it keeps living while it is
        used. Returns the entry with its new `expiresAt`; an absent or expired entry
        is an 'entry not found' error.
        """
        return await api.store_get(namespace, key, extend=True)

    @server.tool(annotations=READS)
    @calls
    async def store_query(
        namespace: StoreNamespace,
        prefix: Annotated[
            str,
            Field(
                max_length=512,
                description="Only keys that start with this literal text (no wildcards: "
                "* ? [ are text); empty lists the most recently updated entries.",
            ),
        ] = "",
        limit: Annotated[int, Field(ge=1, le=1000, description="At most this many entries.")] = 20,
    ) -> Obj:
        """List entries of a store namespace: by key prefix, or the most recent.

        Returns `items`, each a whole entry (`key`, `value`, `writer`, `updated`,
        `expiresAt`, ...). Expired entries never appear. Use it to see what your team
        already knows about a topic before you work it out again.
        """
        return await api.store_list(namespace, prefix, limit)


def _add_anchor_tools(server: MCPServer, api: toolcalls.JobApi, calls: Wrap) -> None:
    @server.tool(annotations=READS)
    @calls
    async def anchor_get(
        job_id: Annotated[
            str | None,
            Field(
                max_length=253,
                description="Another job of your chain whose anchor to read; leave it "
                "empty for your own.",
            ),
        ] = None,
    ) -> Obj:
        """Read your anchor (or that of another job of your chain).

        Your anchor is your own recovery note, which you keep current with anchor_set.
        Read it after a context reset to find where you were.
        Returns `anchor`; a job that wrote none is an 'anchor not found' error.
        """
        return await api.anchor_get(job_id or None)

    @server.tool(annotations=WRITES)
    @calls
    async def anchor_set(
        task: Annotated[str | None, Field(description="What you were asked to do.")] = None,
        status: Annotated[str | None, Field(description="Where you are, in a few words.")] = None,
        progress: Annotated[
            str | list[str] | None,
            Field(description="What is done: a sentence or a list of steps."),
        ] = None,
        decisions: Annotated[
            list[str] | None, Field(description="Decisions made, and why.")
        ] = None,
        waiting_on: Annotated[
            list[str] | None, Field(description="What you wait for (a delegated job, ...).")
        ] = None,
        blocked_by: Annotated[list[str] | None, Field(description="What blocks you.")] = None,
        files: Annotated[list[str] | None, Field(description="Files you work on.")] = None,
        key_facts: Annotated[
            list[str] | None, Field(description="Facts you must not lose.")
        ] = None,
    ) -> Obj:
        """Replace your anchor: a short note of your task, progress and next step.

        Keep it current as you work (after each milestone or decision), so that you,
        or whoever reads it, can resume after a context reset or compaction; a retried
        attempt of your job starts from it. It replaces the whole previous anchor, so
        pass every field you want kept. Only your own job may write it; jobs of your
        chain may read it. Refused when it is over 2 KB as compact JSON: keep it a
        summary. Returns the stored `anchor` and its `size` in bytes.
        """
        given = {
            "task": task,
            "status": status,
            "progress": progress,
            "decisions": decisions,
            "waitingOn": waiting_on,
            "blockedBy": blocked_by,
            "files": files,
            "keyFacts": key_facts,
        }
        anchor = {k: v for k, v in given.items() if v is not None}
        if not anchor:
            # Unknown arguments are dropped before the call, so a misspelt field would
            # otherwise replace the anchor with an empty one.
            raise ToolError(
                "This anchor names none of its fields (task, status, progress, decisions,"
                " waiting_on, blocked_by, files, key_facts): nothing was written."
            )
        return await api.anchor_put(anchor)

    @server.tool(annotations=READS)
    @calls
    async def team_anchor_get() -> Obj:
        """Read your chain's team anchor: what the chain's jobs have done so far.

        The operator keeps it (at most 4 KB) as jobs of your chain end. Returns
        `anchor`; before the first job's end it is an 'anchor not found' error.
        """
        return await api.team_anchor()


def _add_github_tools(server: MCPServer, api: toolcalls.JobApi, calls: Wrap) -> None:
    @server.tool(annotations=GITHUB)
    @calls
    async def progress_note(
        note: Annotated[
            str,
            Field(
                min_length=1,
                description="One short line of plain text, at most 300 characters.",
            ),
        ],
    ) -> Obj:
        """Show where you are on the chain's GitHub comment, for the people watching it.

        The comment that tracks your chain lists each job's phase; this adds one line
        for your job, such as "tests pass, now updating the docs". Each note replaces
        your previous one. It is shown as plain text: Markdown, HTML, links and
        @mentions are not rendered, so it notifies nobody. It appears only where the
        chain came from a GitHub issue or pull request. Refused when over 300
        characters.
        """
        return await api.progress_note(note)

    @server.tool(annotations=GITHUB)
    @calls
    async def review(
        verdict: Annotated[
            Literal["approve", "comment", "request_changes"],
            Field(description="Your verdict on the pull request."),
        ],
        body: Annotated[str, Field(description="The review's text (Markdown).")] = "",
        comments: Annotated[
            list[ReviewComment] | None,
            Field(description="Comments on lines of the pull request's diff (at most 50)."),
        ] = None,
    ) -> Obj:
        """Review your chain's pull request: approve, comment or request changes, with
        comments on lines of its diff.

        Use it once you have read the change (the same as ending your output with an
        `agentchain-review` block; a review sent here counts over one). Nothing is
        posted yet: the operator posts it when your job succeeds, once, on the pull
        request your chain was started on or opened. A comment on a line the diff does
        not show is put into the review's text with its file and line, never lost. Text
        is shown escaped: no @mentions, no HTML. Sending again replaces the review.
        Returns `verdict` and the number of `comments`. Refused when it is not a review
        (the reason says why), over 64,000 characters, or after your job ended; posted
        only if your agent is a reviewer (`spec.github.review`).
        """
        sent: Obj = {"verdict": verdict, "body": body}
        if comments:
            sent["comments"] = [c.model_dump(exclude_none=True) for c in comments]
        return await api.review(sent)

    @server.tool(annotations=GITHUB)
    @calls
    async def github_token() -> Obj:
        """Get a fresh GitHub installation token for your job's repository.

        GitHub tokens live one hour; use this when yours (GITHUB_TOKEN) has expired or
        is about to. The new token has exactly your job's scope: the repository of the
        event that started the chain and your agent's declared permissions. Returns
        `token`, `expiresAt`, `repository` and `permissions`. Refused when your agent
        declares no GitHub permissions or the operator has no GitHub App, and after 24
        tokens for one job.
        """
        return await api.github_token()


TERMINATED = 128 + signal.SIGTERM
"""The exit status after SIGTERM: a process that signal ended, as a shell reports it."""


async def serve(env: toolcalls.JobEnv, tracing: toolspans.ToolTracing | None = None) -> None:
    """Serve until the client closes stdin, then send the spans queued; on SIGTERM,
    send them and end the process (:func:`_terminated`)."""
    tracing = tracing or toolspans.ToolTracing({})
    loop = asyncio.get_running_loop()
    ending: set[asyncio.Task[None]] = set()  # Held: the loop keeps only a weak reference.
    loop.add_signal_handler(
        signal.SIGTERM, lambda: ending.add(loop.create_task(_terminated(tracing)))
    )
    try:
        async with aiohttp.ClientSession() as session:
            await build_server(toolcalls.JobApi(env, session), tracing).run_stdio_async()
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        await asyncio.to_thread(tracing.shutdown)


async def _terminated(tracing: toolspans.ToolTracing) -> None:
    """SIGTERM: send the queued spans, then end the process at once.

    Python's default on SIGTERM ends the process there and then, spans and all.  Nor can
    the server be stopped by cancelling it: it waits for its client's next message in a
    thread reading stdin (anyio's), which no cancellation interrupts, so it would stop
    only once the client closed stdin.  So the spans go first, then the process ends
    as SIGTERM would have ended it."""
    await asyncio.to_thread(tracing.shutdown)
    sys.stdout.flush()
    os._exit(TERMINATED)


def main(environ: Mapping[str, str] | None = None) -> int:
    """Serve the tools on stdin/stdout until the client closes them; 2 without the env."""
    environ = os.environ if environ is None else environ
    try:
        env = toolcalls.JobEnv.from_environ(environ)
    except toolcalls.MissingEnvironment as exc:
        print(f"agentchain mcp: {exc}", file=sys.stderr)
        return 2
    asyncio.run(serve(env, toolspans.ToolTracing(environ)))
    return 0
