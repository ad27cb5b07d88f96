"""The operator's HTTP side, kept apart from the engine that runs jobs.

``app.build_app`` wires the two listeners: the GitHub webhook (``hooks``) on one, the
job API (``jobapi``), the dashboard (``dashboard``), the OpenAPI document, metrics and
health on the other. The modules here are what they share: the server, bounded request
reading (``intake``, ``requests``), one error shape (``responses``), bearer tokens
(``auth``), request models (``schemas``), the AgentJob views (``serializers``,
``listing``). The web side only *creates* AgentJobs and reads state: the engine picks
new AgentJobs up, so ingress stays fast and restarts lose nothing.
"""
