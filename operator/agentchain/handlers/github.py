"""The GitHub side's shutdown: stop the write-back worker before the runtime closes.

Nothing needs starting: the worker starts on the first AgentJob that came through an
App installation (``github/writeback.observe``), and without App credentials it never
exists.  Whatever it had not written yet is redone by the next operator, whose watch
lists every AgentJob again.
"""

from __future__ import annotations

from typing import Any

import kopf

from agentchain.github import appruntime


@kopf.on.cleanup()
async def stop_writeback(memo: kopf.Memo, **_: Any) -> None:
    runtime = getattr(memo, "runtime", None)
    if runtime is not None:
        await appruntime.close(runtime)
