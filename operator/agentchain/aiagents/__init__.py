"""AiAgents as the operator keeps them: their ``Ready`` condition, true to their namespace
(``readiness``), written one way (``conditionwriting``). Pure rules in ``rules``: trigger
resolution and static rings, repository binding and the sender policy.
"""
