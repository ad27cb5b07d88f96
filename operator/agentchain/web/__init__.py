"""The operator's HTTP side, kept apart from the engine that runs jobs.

GitHub webhook, job API (jobs, delegation, store, anchors), OpenAPI document,
metrics, health and the optional read-only dashboard; ``app.build_app`` wires
them.  The web layer only *creates* AgentJobs and reads state: the engine picks
new AgentJobs up, so ingress stays fast and restarts lose nothing.
"""
