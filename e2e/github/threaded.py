"""An aiohttp application served on 127.0.0.1 (or another address of this machine; a
free port) from a daemon thread.

Both stand-ins use it, so a test's own thread can read and change their state directly
while other processes (the operator, ``git``) reach them over real HTTP.
"""

from __future__ import annotations

import asyncio
import ssl
import threading

from aiohttp import web

STARTUP_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 10.0


class ThreadedSite:
    def __init__(
        self,
        application: web.Application,
        name: str,
        ssl_context: ssl.SSLContext | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self._application = application
        self.host = host
        self._name = name
        self._ssl_context = ssl_context
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._serve, args=(ready,), daemon=True, name=self._name
        )
        self._thread.start()
        if not ready.wait(STARTUP_TIMEOUT_SECONDS) or self._failure is not None:
            raise RuntimeError(f"{self._name} did not start: {self._failure!r}")

    def _serve(self, ready: threading.Event) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        runner = web.AppRunner(self._application, access_log=None)
        try:
            loop.run_until_complete(runner.setup())
            loop.run_until_complete(
                web.TCPSite(runner, self.host, 0, ssl_context=self._ssl_context).start()
            )
            self.port = runner.addresses[0][1]
        except BaseException as failure:
            self._failure = failure
            return
        finally:
            ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        thread.join(timeout=STOP_TIMEOUT_SECONDS)
