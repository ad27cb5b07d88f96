"""Agent runtimes: the CLIs an agent runs in (Claude Code, Codex, ...), and the in-pod tools.

``inpod`` runs inside the agent's pod (``agentchain agent run``, ``agentchain mcp``) and
reaches the operator only over the job API; ``rules`` maps an AiAgent's
``spec.runtime`` to its container and each CLI's flags and output (pure).
"""
