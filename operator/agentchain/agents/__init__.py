"""What runs inside an agent's pod: ``agentchain agent run`` (the runner, ``runner.py``)."""
