"""``/readyz`` says where a restart's backlog stands (issue 21).

Aspects covered:
* the answer carries ``backlog``: ``listing`` until every initial list is in, then
  ``working`` with the ``pending`` objects, then ``done`` (and stays done);
* whatever the backlog, readiness itself is Redis and the Kubernetes API only (here
  no API server answers, so 503 throughout: the backlog changes the body, not the code).
"""

from __future__ import annotations

from agentchain.core.runtime import Runtime
from tests.unit.web.conftest import Client


async def _readyz(internal: Client) -> tuple[int, dict[str, object]]:
    response = await internal.get("/readyz")
    return response.status, await response.json()


async def test_readyz_tells_the_backlog_without_changing_readiness(
    internal: Client, runtime: Runtime
) -> None:
    status, body = await _readyz(internal)
    assert (body["backlog"], body["pending"]) == ("listing", 0)
    backlog = runtime.unsettled.backlog
    backlog.listed = True
    backlog.update(12)
    second, body = await _readyz(internal)
    assert (body["backlog"], body["pending"]) == ("working", 12)
    backlog.update(0)
    third, body = await _readyz(internal)
    assert (body["backlog"], body["pending"]) == ("done", 0)
    assert status == second == third
