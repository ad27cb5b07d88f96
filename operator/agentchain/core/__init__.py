"""The engine's shared core: what every group of the engine uses, and nothing above it.

The process-wide ``runtime`` (settings, stores, memos), the ``Hop`` value a job's steps
share (``hopstate``), the one status writer (``statuswriting``), per-object
``locking``, the AiAgent ``catalog`` from the operator's watch, ``unsettled`` jobs,
the dashboard ``feeds`` and which pods may finish a job (``podowners``). Pure rules in
``rules``: names, outcomes, ownership, provenance (seals), runner exit codes, graphs.
"""
