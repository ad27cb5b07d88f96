"""Flow control: what may hold a job back, and what stops it.

The gates a job passes just before it launches (``gating``): a stop request
(``stoprequests``, its Redis record in ``stoprecords``), concurrency groups
(``admitting``, their slots and queue in ``slots``), approval (``approving``) and chain
budgets (``budgeting``, the usage it counts in ``usage``); and retry backoff
(``retrying``). Pure rules in ``rules``. The hop calls the gates; nothing here imports
the hop.
"""
