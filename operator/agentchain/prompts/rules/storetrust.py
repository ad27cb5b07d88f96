"""Whose word a store entry is, and which agents' prompts it may reach.

A job token may write any store namespace of its tenant, and an entry reaches the prompt
of every agent whose ``contextStore.readNamespaces`` lists that namespace.  Without
more, a job of a chain a stranger started (through an agent whose sender policy admits
``NONE``) could write text that lands in the prompt of an agent strangers may not start:
the very thing delegation's sender check refuses (``delegation.check_caller``).

So every entry carries its writer's *trust mark*, fixed by the operator, never by the
request, and prompt assembly judges it with the reading agent's sender policy, exactly
as a delegation to that agent is judged:

* an admin token's entry, and the entry of a job whose chain no GitHub event started
  (a manual or API run: whoever started it holds Kubernetes or admin access), are
  :data:`TRUSTED` and reach every reader;
* a job of a chain a GitHub event started writes with that event's sender login and
  association (a child job carries its chain's event, so it writes with the same);
  the entry reaches an agent only if that agent's sender policy admits that sender;
* an entry without a mark (written before entries carried one) reaches no prompt.

A withheld entry stays in the prompt's store section as a marker (its key, and that
it was withheld), so the agent sees that something is there and why it cannot read it,
the way a quoted text by a refused author is withheld (``github/rules/matching.py``).
The API itself is unchanged: a job still reads every entry of its tenant, marks or not.
"""

from __future__ import annotations

from agentchain.aiagents.rules import senderpolicy
from agentchain.models.agentjob import JobEvent
from agentchain.models.aiagent import SenderPolicy

TRUSTED = "trusted"
"""The mark of an admin's entry and of a job whose chain no GitHub event started."""
_GITHUB = "github"
WITHHELD = (
    "[withheld: written by a job of a chain whose GitHub sender this agent's sender "
    "policy does not admit, or before store entries recorded their writer's sender]"
)


def mark_of(event: JobEvent | None) -> str:
    """The trust mark of a job whose chain ``event`` started."""
    if event is None or event.source != "github":
        return TRUSTED
    association = (event.sender_association or senderpolicy.NO_ASSOCIATION).upper()
    return f"{_GITHUB}:{association}:{event.sender or ''}"


def admits(mark: str | None, policy: SenderPolicy | None) -> bool:
    """Whether an entry with ``mark`` may reach the prompt of an agent with ``policy``."""
    if mark == TRUSTED:
        return True
    if mark is None or not mark.startswith(f"{_GITHUB}:"):
        return False  # Unmarked (written before marks) or not a mark this code makes.
    _, association, login = mark.split(":", 2)
    refusal = senderpolicy.association_refusal(
        policy or SenderPolicy(), association, login, bot=login.endswith("[bot]")
    )
    return refusal is None


def shown(value: str, mark: str | None, policy: SenderPolicy | None) -> str:
    """What of an entry the prompt of an agent with ``policy`` shows: its value, or
    :data:`WITHHELD`."""
    return value if admits(mark, policy) else WITHHELD
