"""Deterministic names for everything the operator creates.

Exactly-once creation (SPEC §2) rests on names: the operator never asks "did I
already create this?", it derives the one name the object must have and lets
``AlreadyExists`` mean done.  So every name here is a pure function of what
identifies the object (the parent and the step, the agent and the seed), never
of time or randomness, except the job Secret's (see :func:`job_secret_name`).

Every name is a DNS-1123 *label* (lowercase alphanumerics and ``-``, starting and
ending alphanumeric, at most 63 characters).  That is stricter than the
subdomain rule most kinds need, but a label is valid everywhere a name goes:
as a Job name (whose ``job-name`` label must be ≤ 63), as a label value, and as
a pod-name prefix.  Names lead with a readable slug of the agent and end with a
short SHA-256 digest of the identifying parts, JSON-encoded so the parts can
never run into each other (``("ab", "c")`` and ``("a", "bc")`` hash differently),
with a domain word (``"child"``, ``"root"``...) so the kinds of name never share
a digest.  The digest makes distinct inputs give distinct names with
overwhelming probability (48 bits per name; truncation makes exact injectivity
impossible in 63 characters, and only someone able to create AgentJobs in the
namespace could craft a collision on purpose).
"""

from __future__ import annotations

import hashlib
import json
import re

MAX_NAME_LENGTH = 63
"""Kubernetes label values and the ``job-name`` label cap names at 63 characters."""

MAX_CHAIN_ID_LENGTH = 40
NAME_DIGEST_LENGTH = 12
"""Hex digits of SHA-256 in generated names: 48 bits, short enough to leave room to read."""

CHAIN_ID_DIGEST_LENGTH = 20
SECRET_NONCE_BYTES = 8
"""Random bytes in a job Secret's name (16 hex digits)."""
FALLBACK_PREFIX = "agent"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NOT_LABEL_CHARS = re.compile(r"[^-a-z0-9]+")


def is_dns_label(name: str) -> bool:
    """Whether ``name`` is a DNS-1123 label of at most 63 characters."""
    return len(name) <= MAX_NAME_LENGTH and _DNS_LABEL.fullmatch(name) is not None


def is_label_value(value: str) -> bool:
    """Whether ``value`` is a valid Kubernetes label value (may be empty)."""
    return len(value) <= MAX_NAME_LENGTH and _LABEL_VALUE.fullmatch(value) is not None


def child_name(parent_name: str, agent: str) -> str:
    """The AgentJob a chain step from ``parent_name`` to ``agent`` creates.

    Unique per (parent, agent): a resync or a restarted operator re-deriving the
    decision gets the same name and finds the child already there.
    """
    return _readable(agent, _digest("child", parent_name, agent))


def root_job_name(agent: str, seed: str) -> str:
    """The AgentJob that starts a chain at ``agent`` for ``seed`` (e.g. a delivery id)."""
    return _readable(agent, _digest("root", agent, seed))


def chain_id_for(seed: str) -> str:
    """A chain id for ``seed``: 20 hex digits, a valid label value, at most 40 characters.

    Pure digest, no readable prefix: the chain id is selected on
    (``-l labrats.work/chain-id=<id>``) and copied around, never read for meaning;
    the agents in the chain are in its path.
    """
    return _digest("chain", seed)[:CHAIN_ID_DIGEST_LENGTH]


def batch_job_name(agentjob_name: str) -> str:
    """The batch Job that runs an AgentJob.

    The AgentJob's own name when it is already a DNS label (every name this module
    generates is), so ``kubectl get jobs`` and ``kubectl get agentjobs`` line up;
    otherwise (a hand-written name with dots or over 63 characters) a readable
    slug plus a digest of the full name.
    """
    if is_dns_label(agentjob_name):
        return agentjob_name
    return _readable(agentjob_name, _digest("job", agentjob_name))


def attempt_job_name(agentjob_name: str, attempt: int) -> str:
    """The batch Job for ``attempt`` (1-based) of an AgentJob.

    The first is :func:`batch_job_name`; each retry is a Job of its own, ``-a<N>``,
    because its prompt is rebuilt (it carries the job's anchor) and a Job's pod
    template cannot change.
    """
    first = batch_job_name(agentjob_name)
    if attempt <= 1:
        return first
    suffix = f"-a{attempt}"
    if is_dns_label(first + suffix):
        return first + suffix
    room = MAX_NAME_LENGTH - len(suffix)
    return _readable(agentjob_name, _digest("job", agentjob_name), room) + suffix


def job_secret_name(job_name: str, nonce: str) -> str:
    """The Secret holding a batch Job's token and prompt: ``<job name>-<nonce>``.

    The one name here that is not derived again: ``nonce`` is random, made when the
    Job is built, and the Job records the name (``jobspec.secret_name_of``).  A name
    derived from the AgentJob's could be an existing Secret (job names are chosen by
    API callers) that AlreadyExists would then hand to the agent; this one cannot
    have existed before the Job was built, so AlreadyExists means a crashed run of
    the operator created it for that Job.
    """
    room = MAX_NAME_LENGTH - len(nonce) - 1
    prefix = job_name[:room].rstrip("-") or FALLBACK_PREFIX
    return f"{prefix}-{nonce}"


def digest_name(source: str, domain: str, *parts: str) -> str:
    """``<slug of source>-<digest of (domain, parts)>``, a DNS label: the name of an
    object identified by ``parts``, led by the readable ``source`` (trimmed to fit)."""
    return _readable(source, _digest(domain, *parts))


def label_value(text: str) -> str:
    """``text`` itself when it is a valid label value, else a readable slug plus digest."""
    if is_label_value(text):
        return text
    return _readable(text, _digest("label", text))


def issue_label(repository: str, number: int) -> str:
    """The ``labrats.work/github-issue`` label value of a repository's issue or PR.

    A repository name holds ``/``, which no label value may, so the value is a readable
    slug plus a digest of both, within a label value's 63 characters.
    """
    return _readable(f"{repository}-{number}", _digest("issue", repository, str(number)))


def _readable(source: str, digest: str, limit: int = MAX_NAME_LENGTH) -> str:
    """``<slug of source>-<digest>``, trimmed so the whole fits in ``limit`` characters."""
    short = digest[:NAME_DIGEST_LENGTH]
    room = limit - len(short) - 1
    prefix = _slug(source)[:room].rstrip("-") or FALLBACK_PREFIX
    return f"{prefix}-{short}"


def _slug(text: str) -> str:
    """Lowercase ASCII alphanumerics and hyphens, no hyphen at either end."""
    return _NOT_LABEL_CHARS.sub("-", text.lower()).strip("-")


def _digest(domain: str, *parts: str) -> str:
    # ensure_ascii (the default) escapes lone surrogates, so encoding never fails.
    encoded = json.dumps([domain, *parts]).encode("ascii")
    return hashlib.sha256(encoded).hexdigest()
