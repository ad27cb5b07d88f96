"""``POST /webhooks/github``: signatures (``signatures``), the delivery handler
(``webhook``), comment commands (``commands``), concurrency groups stamped at intake
(``groupstamps``) and the durable queue drained into AgentJobs (``jobqueue``).
"""
