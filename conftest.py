"""Top-level pytest wiring: plugins shared by tests/ and e2e/, and hypothesis's settings."""

from collections.abc import AsyncIterator

import pytest

# Imported now rather than by hypothesis's own plugin at the terminal summary: a run of
# e2e tests alone (which use no hypothesis) otherwise compiles hypothesis at the very end,
# and CPython 3.11.7 can fail that compile with "AST constructor recursion depth
# mismatch", turning a green run red.
from hypothesis import HealthCheck, settings

from agentchain.kube import clients

# No clock in a property test: its 200 ms deadline and its "input generation is slow"
# check fail on a shared, loaded machine (CI saw load averages of 9-14 on two cores), not
# on a wrong answer. Speed is measured by the benchmarks under bench/.
settings.register_profile("agentchain", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("agentchain")

pytest_plugins = ["e2e.operator_fixtures"]


@pytest.fixture(autouse=True)
async def _kube_session_closed_in_its_loop() -> AsyncIterator[None]:
    """Close the Kubernetes API session a test's own event loop opened, in that loop.

    ``agentchain.kube.clients`` keeps one aiohttp session per loop, which the operator
    closes at shutdown; a test that talks to a cluster in-process may not. Left open, the
    session is collected later, in whichever test runs then (another module's, once two
    workers share the suite), and pytest reports it there as that test's error.
    """
    yield
    await clients.close()
