"""Redis as the platform: the only product code besides ``memory`` that talks to it.

``connecting`` makes the one client (plain, TLS or Sentinel); ``keys`` names every key
prefix and TTL; ``signing`` and ``sealing`` hold the operator key and what it seals
(records in Redis, AgentJobs' annotations). One module per shared kind of record:
``outputs``, ``answers``, ``chainrecords``, ``tokens``, ``sessionrecords``,
``deliveries``; each group keeps its own records beside its code (``flow/slots``,
``github/githubrecords``, ...). Errors share one hierarchy in ``storeerrors``. Imports
nothing from kopf, kubernetes or aiohttp.
"""
