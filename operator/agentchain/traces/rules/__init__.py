"""The traces' pure side: ids, span values, the agent's trace variables (``spans``)."""
