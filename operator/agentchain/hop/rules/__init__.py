"""The hop's pure decisions: what a chain does when a job ends (``chains``), the
child AgentJob (``childspec``), the batch Job and its Secret (``jobspec``) and
``dependsOn`` cycles (``dependencies``). Values in, values out: no I/O.
"""
