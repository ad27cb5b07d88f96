"""Where things are in a workspace volume (mounted at ``AGENT_WORKSPACE``, /workspace).

``repo/`` is the working tree every step sees; ``.agentchain/`` is agentchain's own
bookkeeping, outside the working tree so ``git status`` never shows it: ``base.json``
(the commit the chain started from, written last by ``prepare``, so its presence
means the checkout is complete) and ``staging/`` (a clone in progress, renamed to
``repo/`` when done). Everything on the volume is writable by the agents, so nothing
read back from it is trusted: ``base.json`` is validated, the repository is only read
as data (``sealing.py``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from agentchain.workspaces.rules import checkouts

DEFAULT_ROOT = "/workspace"
ROOT_ENV = "AGENT_WORKSPACE"
BASE_MAX_BYTES = 16 * 1024
FIELD_MAX_CHARS = 2048
_FIELDS = ("base", "repository", "ref", "branch")


class WorkspaceError(Exception):
    """The workspace cannot be used as it is (the message says why)."""


@dataclass(frozen=True)
class Layout:
    root: Path

    @classmethod
    def at(cls, root: str | None) -> Layout:
        return cls(Path(root or os.environ.get(ROOT_ENV) or DEFAULT_ROOT))

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    @property
    def meta(self) -> Path:
        return self.root / ".agentchain"

    @property
    def staging(self) -> Path:
        return self.meta / "staging"

    @property
    def base_file(self) -> Path:
        return self.meta / "base.json"

    def read_base(self) -> dict[str, str] | None:
        """The recorded base (``{"base": sha, ...}``), None if there is none or it is garbled.

        Only the fields ``prepare`` writes, as bounded strings: an agent may have rewritten
        the file, and what ``prepare`` prints again comes from here.
        """
        if not self.base_file.is_file():  # Not a FIFO that would block the read.
            return None
        try:
            with self.base_file.open("rb") as fh:
                data = json.loads(fh.read(BASE_MAX_BYTES))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or not checkouts.is_sha(str(data.get("base"))):
            return None
        return {key: data[key][:FIELD_MAX_CHARS] for key in _FIELDS
                if isinstance(data.get(key), str)}  # fmt: skip

    def write_base(self, record: dict[str, str]) -> None:
        """Atomically: a crash leaves either no base or the whole one."""
        partial = self.meta / "base.json.partial"
        with partial.open("w", encoding="utf-8") as fh:
            json.dump(record, fh)
            fh.flush()
            os.fsync(fh.fileno())
        partial.replace(self.base_file)
