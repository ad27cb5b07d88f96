"""Everything in Redis; the only product code that talks to it.

``keys`` names every key prefix and TTL; one module per kind of record (``contexts`` with
its layout in ``entries``, ``outputs``, ``tokens``, ``deliveries``, ``chains``, ``anchors``),
each a class taking a ``redis.asyncio.Redis`` (``decode_responses=False``) client.
Errors share one hierarchy in ``errors``. Imports nothing from kopf, kubernetes or aiohttp.
"""
