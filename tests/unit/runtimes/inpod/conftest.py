"""The web layer's fixtures (a Runtime on real Redis, the app served on a socket)."""

from tests.unit.web.conftest import client, runtime, settings

__all__ = ["client", "runtime", "settings"]
