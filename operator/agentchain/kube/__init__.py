"""The only code that talks to the Kubernetes API server (kopf's watches aside).

``clients`` is the one request function (REST over aiohttp, kopf's login, retries,
re-login on 401); ``apierrors`` the typed exceptions every caller catches and the retry
policy; ``resources``, ``workloads`` and ``events`` the calls the engine makes;
``watching``, ``leases``, ``electing`` and ``viewing`` the watches, leader election and
the dashboard's read-only views. Pure rules (leader election) in ``rules``.
"""
