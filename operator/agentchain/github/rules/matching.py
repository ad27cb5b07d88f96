"""Which agents a GitHub delivery starts, and the event data their jobs keep.

Pure decisions over the parsed payload, so the webhook handler only verifies,
deduplicates, calls ``match_event`` and creates one AgentJob per ``Match``.
Every agent that *could* have run but did not gets an ``Ignored`` with a
sentence saying why, which the endpoint returns and logs: a trigger that never
fires is the most common misconfiguration, and the reason is the fix.

Order of checks per agent: enabled, then each ``github`` trigger in order
(event and action, then its filters), then the agent's sender policy for the
first trigger whose filters pass.  Filters come before the sender policy so an
event the agent does not care about is reported as such, not as a refusal.
Agents with no trigger for the event are not reported at all.

Filters that name the App: ``mention`` passes when what the sender just wrote (a
comment, a review, or the issue or pull request they opened: :func:`mention_text`)
mentions ``@<app-slug>`` outside code and quotes (``mentions.py``, one linear pass);
``assignedToApp`` when an ``assigned`` action's assignee is ``<app-slug>[bot]``.  Both
need the slug (``match_event``'s ``app_slug``) and refuse, saying so, without it.  A
``label`` filter on a ``labeled``/``unlabeled`` action is the label just added or
removed, not one the issue already had.

Repository binding comes right after ``enabled``: one webhook secret
serves every namespace, so an agent says which repositories it serves in
``spec.repositories`` (``owner/name`` or ``owner/*``).  A bound agent gets events
from those repositories only; an unbound agent gets events from public
repositories (their text is public anyway) but never from a private or internal
one, whose issue text must reach only agents bound to it.

Sender policy (SPEC §1, untrusted text is data): the association checked is
the one of the content the sender just wrote, most specific first
(``comment``, ``review``, ``pull_request``, ``issue``, top level), so a
stranger commenting on a maintainer's issue is judged as the stranger.  Bots
are refused unless ``allowBots``; an allowed bot skips the association check,
since an installed App has no meaningful association.  Events that only
someone with write access can cause (``push``, ``create``, ``delete``,
``release``) carry no association; their sender counts as COLLABORATOR.

Quoted text: a comment or review event also carries the title (and, for an
empty comment or review, the body) of the issue or pull request, written by its
author, not the sender.  When that author fails the agent's sender policy the
agent still runs (the sender passed), but those fields are replaced by a marker
saying why (``Match.withheld``, applied by :func:`event_for`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from agentchain.aiagents.rules import repositories
from agentchain.aiagents.rules.resolution import Ambiguous, resolve
from agentchain.aiagents.rules.senderpolicy import NO_ASSOCIATION, association_refusal
from agentchain.github.rules.mentions import mentions
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import (
    AiAgentSpec,
    ChainStep,
    EventTrigger,
    SenderPolicy,
    TriggerFilters,
)

TITLE_MAX_BYTES = 1024
BODY_MAX_BYTES = 64 * 1024
LABELS_MAX = 100  # GitHub allows 100 labels per issue; more is a forged payload.
LABEL_MAX_BYTES = 256
REPOSITORY_MAX_BYTES = 201  # GitHub: owner 39 + "/" + name 100, with room.

# Sender needs write access to cause these, and GitHub sends no author_association.
WRITE_ACCESS_EVENTS = frozenset({"push", "create", "delete", "release"})
WRITE_ACCESS_ASSOCIATION = "COLLABORATOR"

# Where the sender's association is read, most specific to the sender first.
_ASSOCIATION_SOURCES = ("comment", "review", "pull_request", "issue")
# Actions about one label, where a label filter means "this label", not "has it".
_LABEL_ACTIONS = frozenset({"labeled", "unlabeled"})


@dataclass(frozen=True)
class AgentCandidate:
    """An AiAgent as the matcher needs it: its object name and its spec."""

    name: str
    spec: AiAgentSpec


@dataclass(frozen=True)
class Match:
    """Start ``agent`` (triggerName) for this event; ``step`` is where it goes next.

    ``withheld`` replaces event fields (``title``, ``body``) that quote text by an
    author the agent's sender policy refuses (see :func:`event_for`).
    """

    agent: str
    agent_object: str
    trigger_index: int
    step: ChainStep | None
    withheld: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Ignored:
    """An agent with a trigger for this event that does not run, and why."""

    agent: str
    reason: str


def parse_event_selector(s: str) -> tuple[str, str | None]:
    """``"issues.opened"`` → ``("issues", "opened")``; ``"push"`` → ``("push", None)``."""
    name, dot, action = s.strip().partition(".")
    if not name or (dot and not action):
        raise ValueError(f"event selector {s!r} is not 'event' or 'event.action'")
    return name, action if dot else None


def match_event(
    event: str,
    action: str | None,
    payload: Mapping[str, Any],
    agents: Sequence[AgentCandidate],
    *,
    app_slug: str | None = None,
) -> tuple[list[Match], list[Ignored]]:
    """Agents to start for one delivery, and those with a trigger that did not fire.

    ``app_slug`` is the operator's GitHub App's slug, which the ``mention`` and
    ``assignedToApp`` filters look for (None: not known, and those filters refuse).
    A triggerName two AiAgents share starts nothing (``aiagents.rules.resolution.resolve``):
    it is reported once, naming both, however many of them matched.
    """
    matches: list[Match] = []
    ignored: list[Ignored] = []
    named = [(c.name, c) for c in agents]
    for candidate in agents:
        outcome = _match_agent(event, action, payload, candidate, app_slug)
        if isinstance(outcome, Match):
            found = resolve(outcome.agent, named, lambda c: c.spec.trigger_name)
            if isinstance(found, Ambiguous):
                outcome = Ignored(outcome.agent, found.message)
            else:
                matches.append(outcome)
                continue
        if outcome is not None and outcome not in ignored:
            ignored.append(outcome)
    return matches, ignored


def needs_app_slug(agents: Sequence[AgentCandidate]) -> bool:
    """Whether any of ``agents`` has a trigger filter that looks for the App's slug (so
    the webhook asks for it only then)."""
    return any(
        t.filters is not None and bool(t.filters.mention or t.filters.assigned_to_app)
        for c in agents
        for t in c.spec.event_triggers
    )


def _match_agent(
    event: str,
    action: str | None,
    payload: Mapping[str, Any],
    candidate: AgentCandidate,
    app_slug: str | None,
) -> Match | Ignored | None:
    spec = candidate.spec
    selected = [
        (index, trigger)
        for index, trigger in enumerate(spec.event_triggers)
        if trigger.source == "github" and _selects(trigger, event, action)
    ]
    if not selected:
        return None
    if not spec.enabled:
        return Ignored(spec.trigger_name, "agent disabled")
    binding = repositories.refusal(spec.repositories, payload)
    if binding is not None:
        return Ignored(spec.trigger_name, binding)
    first_refusal = ""
    policy = spec.sender_policy or SenderPolicy()
    for index, trigger in selected:
        refusal = _filter_refusal(trigger.filters, action, payload, app_slug)
        if refusal is None:
            refusal = _sender_refusal(policy, event, payload)
            if refusal is None:
                withheld = _withheld(policy, payload)
                return Match(spec.trigger_name, candidate.name, index, trigger.next, withheld)
            # The sender policy is the agent's, so no later trigger can pass it either.
            return Ignored(spec.trigger_name, refusal)
        first_refusal = first_refusal or refusal
    return Ignored(spec.trigger_name, first_refusal)


def _selects(trigger: EventTrigger, event: str, action: str | None) -> bool:
    for selector in trigger.events:
        try:
            name, wanted = parse_event_selector(selector)
        except ValueError:
            continue  # A malformed selector selects nothing; the AiAgent status reports it.
        if name == event and (wanted is None or wanted == action):
            return True
    return False


# --------------------------------------------------------------------------- filters


def _filter_refusal(
    filters: TriggerFilters | None,
    action: str | None,
    payload: Mapping[str, Any],
    app_slug: str | None,
) -> str | None:
    if filters is None:
        return None
    refusal = _app_refusal(filters, action, payload, app_slug)
    if refusal:
        return refusal
    if filters.label is not None:
        refusal = _label_refusal(filters.label, action, payload)
        if refusal:
            return refusal
    if filters.repository is not None:
        repo = _text(payload, "repository", "full_name")
        if repo is None or repo.casefold() != filters.repository.casefold():
            return (
                f"filter repository {filters.repository}: event is from {repo or 'no repository'}"
            )
    if filters.sender is not None:
        login = _text(payload, "sender", "login")
        if login is None or login.casefold() != filters.sender.casefold():
            return f"filter sender {filters.sender}: sent by {login or 'nobody'}"
    return None


def _app_refusal(
    filters: TriggerFilters, action: str | None, payload: Mapping[str, Any], slug: str | None
) -> str | None:
    """The ``mention`` and ``assignedToApp`` filters, which need the App's slug."""
    if not (filters.mention or filters.assigned_to_app):
        return None
    if not slug:
        return (
            "the GitHub App's slug is not known (set AGENTCHAIN_GITHUB_APP_SLUG, or "
            "configure the App): mention and assignedToApp filters cannot pass"
        )
    if filters.mention:
        text = mention_text(payload)
        if text is None:
            return "filter mention: the event carries no text its sender wrote"
        if not mentions(text, slug):
            return f"filter mention: the text does not mention @{slug}"
    if filters.assigned_to_app:
        login = f"{slug}[bot]"
        assignee = _text(payload, "assignee", "login")
        if action != "assigned" or assignee is None:
            return f"filter assignedToApp: the event assigns nobody ({action or 'no action'})"
        if assignee.casefold() != login.casefold():
            return f"filter assignedToApp: assigned to {assignee}, not {login}"
    return None


def mention_text(payload: Mapping[str, Any]) -> str | None:
    """The text the sender just wrote, where a mention of the App counts.

    A comment's or review's body; for an issue or pull request event, its body when the
    sender wrote it (opened it), never when someone else edits or labels another's text.
    """
    for source in ("comment", "review"):
        if _mapping(payload, source):
            return _text(payload, source, "body") or ""
    subject = _subject(payload)
    author = _text(subject, "user", "login")
    sender = _text(payload, "sender", "login")
    if subject and author is not None and sender is not None and author == sender:
        return _text(subject, "body") or ""
    return None


def _label_refusal(label: str, action: str | None, payload: Mapping[str, Any]) -> str | None:
    wanted = label.casefold()  # GitHub label names are unique regardless of case.
    if action in _LABEL_ACTIONS and isinstance(payload.get("label"), Mapping):
        changed = _text(payload, "label", "name") or ""
        if changed.casefold() == wanted:
            return None
        return f"filter label {label}: the label {action} is {changed or 'unnamed'}"
    if any(name.casefold() == wanted for name in _labels(payload)):
        return None
    return f"filter label {label} not present"


# --------------------------------------------------------------------------- sender policy


def sender_refusal(policy: SenderPolicy, event: str, payload: Mapping[str, Any]) -> str | None:
    """Why ``policy`` refuses the delivery's sender (None: it admits them), as a trigger
    judges it: for what else the sender may start (a follow-up round on a review)."""
    return _sender_refusal(policy, event, payload)


def _sender_refusal(policy: SenderPolicy, event: str, payload: Mapping[str, Any]) -> str | None:
    login = _text(payload, "sender", "login") or ""
    association = sender_association(event, payload)
    return association_refusal(policy, association, login, bot=_is_bot(payload))


def sender_association(event: str, payload: Mapping[str, Any]) -> str:
    """The author_association the sender policy judges (see the module docstring)."""
    for source in _ASSOCIATION_SOURCES:
        value = _text(payload, source, "author_association")
        if value:
            return value.upper()
    value = _text(payload, "author_association")
    if value:
        return value.upper()
    return WRITE_ACCESS_ASSOCIATION if event in WRITE_ACCESS_EVENTS else NO_ASSOCIATION


def _is_bot(payload: Mapping[str, Any], who: str = "sender") -> bool:
    login = _text(payload, who, "login") or ""
    return _text(payload, who, "type") == "Bot" or login.endswith("[bot]")


# --------------------------------------------------------------------------- quoted text


def _withheld(policy: SenderPolicy, payload: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Event fields quoting an issue or pull request whose author ``policy`` refuses.

    Only comment and review events quote text by someone else than the sender:
    the issue's or pull request's title, and its body when the comment or review
    has none (see :func:`event_from_payload`).  The sender passed the policy; the
    subject's author is judged the same way, and what they wrote is replaced by a
    marker instead of refusing the run, so a maintainer can still start an agent
    by commenting on a stranger's issue without the stranger's text steering it.
    """
    if not (_mapping(payload, "comment") or _mapping(payload, "review")):
        return ()
    subject = _subject(payload)
    if not subject:
        return ()
    association = (_text(subject, "author_association") or NO_ASSOCIATION).upper()
    login = _text(subject, "user", "login") or ""
    refusal = association_refusal(policy, association, login, bot=_is_bot(subject, "user"))
    if refusal is None:
        return ()
    kind = "pull request" if _mapping(payload, "pull_request") else "issue"
    marker = (
        f"[withheld: the {kind}'s {{}} was written by an author this agent's sender "
        f"policy does not allow ({refusal.removeprefix('sender policy: ')})]"
    )
    fields = [("title", marker.format("title"))]
    if not (_text(payload, "comment", "body") or _text(payload, "review", "body")):
        fields.append(("body", marker.format("body")))
    return tuple(fields)


def event_for(event: JobEvent, match: Match) -> JobEvent:
    """The event data ``match``'s job keeps: ``event`` with the withheld fields replaced."""
    if not match.withheld:
        return event
    return event.model_copy(update=dict(match.withheld))


# --------------------------------------------------------------------------- event data


def event_from_payload(
    event: str, payload: Mapping[str, Any], *, delivery_id: str, hook_id: str | None
) -> JobEvent:
    """The parts of a delivery prompts use, as plain, bounded strings.

    Issue and pull-request events give the issue's title and body; comment and
    review events the issue's title and the comment's body (what the sender
    just wrote); ``push`` the head commit's first line and message.
    """
    subject = _subject(payload)
    head_commit = _mapping(payload, "head_commit")
    message = _text(head_commit, "message")
    title = _text(subject, "title") or (message.partition("\n")[0] if message else None)
    body = _text(payload, "comment", "body") or _text(payload, "review", "body")
    body = body or _text(subject, "body") or message
    return JobEvent(
        source="github",
        name=event,
        action=_text(payload, "action"),
        delivery_id=delivery_id,
        hook_id=hook_id,
        repository=_text(payload, "repository", "full_name"),
        sender=_text(payload, "sender", "login"),
        sender_association=sender_association(event, payload),
        number=_number(subject) or _number(payload),
        title=_bounded(title, TITLE_MAX_BYTES),
        body=_bounded(body, BODY_MAX_BYTES),
        url=_url(payload, subject),
        labels=[_bounded(n, LABEL_MAX_BYTES) or "" for n in _labels(payload)[:LABELS_MAX]],
        **_github_target(payload),
    )


def _github_target(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Where a chain is written back: the installation, and whether the
    number is an issue or a pull request (an issue payload's ``pull_request`` key says
    it is one), with a pull request's head commit for its Check Run."""
    installation = _number_at(_mapping(payload, "installation"), "id")
    pull = _mapping(payload, "pull_request")
    issue = _mapping(payload, "issue")
    subject = "pull_request" if pull or "pull_request" in issue else "issue" if issue else None
    sha = _text(pull, "head", "sha")
    valid_sha = (
        sha if sha and len(sha) == 40 and all(c in "0123456789abcdef" for c in sha) else None
    )
    head_repository = _text(pull, "head", "repo", "full_name")
    return {
        "installation_id": installation,
        "subject": subject,
        "head_sha": valid_sha,
        "head_repository": _bounded(head_repository, REPOSITORY_MAX_BYTES),
    }


def _number_at(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    valid = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return value if valid else None


def _subject(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(payload, "pull_request") or _mapping(payload, "issue")


def _url(payload: Mapping[str, Any], subject: Mapping[str, Any]) -> str | None:
    for source in ("comment", "review"):
        url = _text(payload, source, "html_url")
        if url:
            return url
    return (
        _text(subject, "html_url")
        or _text(payload, "compare")
        or (_text(payload, "repository", "html_url"))
    )


def _number(data: Mapping[str, Any]) -> int | None:
    value = data.get("number")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _labels(payload: Mapping[str, Any]) -> list[str]:
    names: list[str] = []
    for source in ("issue", "pull_request"):
        labels = _mapping(payload, source).get("labels")
        if not isinstance(labels, list):
            continue
        for label in labels:
            name = _text(label, "name") if isinstance(label, Mapping) else None
            if name and name not in names:
                names.append(name)
    return names


def _bounded(text: str | None, max_bytes: int) -> str | None:
    """``text`` without NULs (they cannot travel in env) within ``max_bytes`` of UTF-8.

    A cut text ends with a visible marker saying the full size, and is cut on a
    character boundary (the ``ignore`` decode drops a split trailing sequence).
    """
    if text is None:
        return None
    clean = text.replace("\x00", "")
    raw = clean.encode("utf-8", "replace")  # Lone surrogates from JSON become "?".
    if len(raw) <= max_bytes:
        return raw.decode("utf-8")
    marker = f" … [truncated: {len(raw)} bytes in total]"
    keep = max_bytes - len(marker.encode("utf-8"))
    return raw[:keep].decode("utf-8", "ignore") + marker


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    # A payload is parsed JSON, so nearly always a dict: checked first, as the Mapping
    # ABC's check costs ten times more and a delivery makes dozens of them.
    return isinstance(value, dict) or (value is not None and isinstance(value, Mapping))


def _mapping(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    return value if _is_mapping(value) else {}


def _text(data: Mapping[str, Any], *path: str) -> str | None:
    """The string at ``path`` in nested mappings, or None for anything else."""
    value: Any = data
    for key in path:
        if not _is_mapping(value):
            return None
        value = value.get(key)
    return value if isinstance(value, str) else None
