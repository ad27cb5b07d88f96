"""The hop's pure decisions: what a chain does when a job ends (``chains``), the
child AgentJob (``childspec``), the batch Job and its Secret (``jobspec``) and
``dependsOn`` cycles (``dependencies``), how long a job waits for an AiAgent that is
not there yet (``agentwaits``), which jobs hold a chain open
when a branch ends (``branches``). Values in, values out: no I/O.
"""
