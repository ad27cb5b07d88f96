"""The only code that talks to the Kubernetes API server (kopf's watches aside).

``clients`` is the one request function (REST over aiohttp, kopf's login, retries,
re-login on 401); ``errors`` the typed exceptions every caller catches and the retry
policy; ``resources``, ``workloads`` and ``events`` the calls the engine makes.
"""
