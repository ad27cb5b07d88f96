"""Test-only failpoints: die at a named point, like etcd's gofail.

An end-to-end test proves that a step survives a crash at an exact line by starting
the operator with ``AGENTCHAIN_CRASHPOINT=<name>``: when the code reaches
``crashpoint("<name>")`` the process SIGKILLs itself, so no ``finally``, no atexit
handler and no kopf cleanup runs — the same as an OOM kill or a lost node. The
variable is read at each call, so a test may set it for one start and drop it for the
restart. Unset (always, in production) a crashpoint is one dictionary look-up.

Named points:

* ``learnings-claimed`` — in ``prompts.prompting``, right after a job's learnings are
  claimed in Redis and before the ConfigMap is read and the prompt built.
* ``child-created`` — in ``hop.hopping``, right after a chain child's AgentJob was
  created and before it is launched and its parent's ``status.next`` written.
* ``workspace-publish-created`` — in ``workspaces.publishing``, right after a chain's publish
  Job was created and before the chain's last job is settled.
* ``workspace-pull-created`` — in ``workspaces.publishing``, right after the chain's pull
  request was created and before that was recorded.
* ``github-review-created`` — in ``github.reviewing``, right after a reviewer's pull
  request review was created and before its id was recorded.
"""

from __future__ import annotations

import os
import signal

CRASHPOINT_ENV = "AGENTCHAIN_CRASHPOINT"


def crashpoint(name: str) -> None:
    """SIGKILL this process if ``AGENTCHAIN_CRASHPOINT`` equals ``name``; else do nothing."""
    if os.environ.get(CRASHPOINT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
