"""kopf registrations: thin, one module per resource.

Importing this package registers every handler with kopf's default registry.
"""

from agentchain.handlers import agentjobs, aiagents, github, lifecycle, workloads

__all__ = ["agentjobs", "aiagents", "github", "lifecycle", "workloads"]
