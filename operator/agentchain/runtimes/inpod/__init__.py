"""The agent side: what runs inside an agent's pod, beside the agent's own CLI.

``agentchain agent run`` (the runner: ``runner.py``, ``runtimes.py``) drives the CLI
and hands its answer and usage to the operator; ``agentchain mcp`` (``mcpserving.py``)
gives the CLI the seeds' features as MCP tools, each call a span under the job's
(``toolspans.py``). Nothing here runs in the operator. It
knows only the pod's environment (``AGENT_API_URL``, ``AGENT_TOKEN``,
``AGENT_NAMESPACE``, ``AGENT_JOB``, ``AGENT_CHAIN_ID``, ...) and reaches the operator
through the job API over HTTP with the job's own token, never through Kubernetes or
Redis.
"""
