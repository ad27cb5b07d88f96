"""The hop: one chain step, from an attempt's end to the child AgentJob it leads to.

``attempts`` reads the pod and batch Job watches into "running" or "ended how" and hands
an ended attempt to ``hopping.finish``, which runs the sequence (capture → decide →
spawn → launch → close; docs/architecture.md walks it). ``stopping`` ends a job that was
asked to stop, ``resync`` is the level-triggered catch-up for whatever happened while
the operator was away, and ``depending`` holds a job whose ``dependsOn`` has not ended.
Features hook in through ``launching`` (the gate list before a job runs) and
``closing`` (what a job's end frees). Its pure decisions are in ``rules`` (what a chain
does next, the child's spec, the batch Job's spec). Imported by ``handlers`` and
``web`` only.
"""
