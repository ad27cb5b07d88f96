"""kopf registrations and the operator's own watches: thin, one module per resource.

Importing this package registers every kopf handler with kopf's default registry;
``watches`` runs the AgentJob, batch Job and pod watches (``lifecycle`` starts it).
"""

from agentchain.handlers import agentevents, jobevents, lifecycle, podevents, watches

__all__ = ["agentevents", "jobevents", "lifecycle", "podevents", "watches"]
