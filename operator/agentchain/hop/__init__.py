"""The hop: one chain step, from an attempt's end to the child AgentJob it leads to.

Every event about an AgentJob, its batch Job or its pod ends in one function,
``reconciling.reconcile``: it reads what exists (the AgentJob, its attempt as
``attempts`` reads it from the watches' indexes, the ending recorded in Redis) and does
the next missing step through ``hopping``, which runs the sequence (capture → decide →
spawn → launch → close; docs/architecture.md walks it).  ``stopping`` claims the
ending of a job asked to stop, ``resync`` reconciles every unsettled job periodically
(what happened while the operator was away), and ``depending`` holds a job whose
``dependsOn`` has not ended.
Features hook in through ``launching`` (the gate list before a job runs) and
``closing`` (what a job's end frees). Its pure decisions are in ``rules`` (what a chain
does next, the child's spec, the batch Job's spec). Imported by ``handlers`` and
``web`` only.
"""
