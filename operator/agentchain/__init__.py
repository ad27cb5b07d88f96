"""agentchain: run AI agents as Kubernetes Jobs and cascade them into chains."""

__version__ = "0.1.0"
