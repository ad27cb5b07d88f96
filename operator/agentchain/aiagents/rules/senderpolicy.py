"""An AiAgent's sender policy: which authors it admits, by their association.

One rule, used wherever an author's text could reach an agent: a GitHub delivery's
sender (``github/rules/matching``), the author of quoted text, a comment command's
commenter, a delegation's originating sender (``prompts/rules/delegation``) and the
writer of a store entry (``prompts/rules/storetrust``). Bots are refused unless
``allowBots``; an allowed bot skips the association check, since an installed App has
no meaningful association. Pure: no I/O.
"""

from __future__ import annotations

from agentchain.models.aiagent import SenderPolicy

NO_ASSOCIATION = "NONE"


def association_refusal(
    policy: SenderPolicy, association: str, login: str, *, bot: bool
) -> str | None:
    """Why ``policy`` refuses an author with this association (None: it allows them)."""
    if bot:
        if policy.allow_bots:
            return None
        return f"sender policy: bot sender {login or 'unknown'} not allowed"
    allowed = {a.upper() for a in policy.allowed_associations}
    if association.upper() in allowed:
        return None
    return f"sender policy: author_association {association.upper()} not allowed"
