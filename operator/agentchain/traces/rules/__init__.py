"""The traces' pure side: ids, span values, the agent's trace variables (``spans``), the
hop's steps (``steps``), the GitHub write-back's writes (``githubwrites``)."""
