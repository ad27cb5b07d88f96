"""The operator's seal on the AgentJobs it writes (``policy.provenance`` says why).

A seal is ``HMAC(sub-key, sealed parts)`` in the ``labrats.work/seal`` annotation,
under the operator key's own sub-key for this purpose (``signing.JOB_SEAL_PURPOSE``),
so no token, queue signature or other record verifies as a seal. The parts bind it to
the job's namespace and name: a seal copied onto another AgentJob, or kept while the
event or the chain annotations are edited, does not verify.
"""

from __future__ import annotations

from typing import Any

from agentchain import models
from agentchain.policy import provenance
from agentchain.store import signing
from agentchain.store.signing import OperatorKeys

Obj = dict[str, Any]


def _parts(obj: Obj) -> tuple[bytes, ...]:
    meta = obj.get("metadata") or {}
    return provenance.sealed_parts(
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
        obj.get("spec") or {},
        meta.get("annotations") or {},
    )


def seal(keys: OperatorKeys, body: Obj) -> Obj:
    """``body`` (an AgentJob about to be created) with the operator's seal on it."""
    annotations = body["metadata"].setdefault("annotations", {})
    annotations.pop(models.SEAL, None)
    subkey = keys.subkeys(signing.JOB_SEAL_PURPOSE)[0]
    annotations[models.SEAL] = signing.mac(subkey, *_parts(body))
    return body


def sealed(keys: OperatorKeys, obj: Obj) -> bool:
    """Whether the operator sealed ``obj`` as it is now (any configured key)."""
    found = ((obj.get("metadata") or {}).get("annotations") or {}).get(models.SEAL)
    if not isinstance(found, str) or not found:
        return False
    return signing.verify(keys.subkeys(signing.JOB_SEAL_PURPOSE), found, *_parts(obj))
