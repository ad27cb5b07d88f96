"""What an agent is told: its prompt, its chain's context and the team anchor.

``prompting`` gathers what goes into a job's prompt (the parent's output, learnings,
the store entries it may read, its anchor) and ``teamkeeping`` keeps each chain's team
anchor as the hop moves along. The text is built by the pure ``rules``: prompt assembly,
the ``<chain-context>`` block, delegation, store trust and the team anchor.
"""
