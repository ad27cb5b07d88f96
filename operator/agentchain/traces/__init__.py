"""Traces: one OpenTelemetry trace per chain (``docs/observability.md``).

``rules/spans`` derives every id and describes every span as a value (``rules/steps``
a hop's steps, ``rules/githubwrites`` the GitHub write-back's writes); ``outbox`` records
a span once, durably, in Redis at the moment what it describes has ended; ``exporting``
drains the outbox to the OTLP endpoint the standard ``OTEL_*`` variables name (nothing at
all when they name none).
"""
