"""The documentation keeps up with the code it describes.

Aspects covered (issue 7, "Done when"):
* every reason the operator can put on a job or an agent (``Reason.all()``) appears in
  ``docs/troubleshooting.md``, written as code (```Reason```), so a new reason without
  an explanation fails the build;
* every reason documented in the reference tables is one the operator really emits, so
  a renamed or removed reason does not linger in the docs;
* the operator's RBAC rules and the key prefixes/TTLs the architecture and security pages
  rely on are the ones in the code.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from agentchain.models.conditions import Reason
from agentchain.store import keys

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TROUBLESHOOTING = (DOCS / "troubleshooting.md").read_text()
REFERENCE = TROUBLESHOOTING.split("## Reference: every reason", 1)[1]


@pytest.mark.parametrize("reason", Reason.all())
def test_every_reason_is_explained_in_troubleshooting(reason: str) -> None:
    assert f"`{reason}`" in REFERENCE, f"docs/troubleshooting.md does not explain {reason}"


def test_reference_tables_document_only_real_reasons() -> None:
    documented = re.findall(r"^\| `([A-Za-z]+)` \|", REFERENCE, flags=re.MULTILINE)
    assert sorted(documented) == Reason.all()


def test_security_rbac_table_lists_every_rule() -> None:
    groups = yaml.safe_load(
        (ROOT / "charts" / "agentchain" / "files" / "rbac-rules.yaml").read_text()
    )
    rules = groups["namespaced"] + groups["clusterWide"]
    table = (DOCS / "security.md").read_text().split("## Least-privilege RBAC", 1)[1]
    for rule in rules:
        resources = ", ".join(f"`{r}`" for r in rule["resources"])
        verbs = ", ".join(rule["verbs"])
        assert f"| {resources} | {verbs} |" in table, f"rule {rule} missing from security.md"


@pytest.mark.parametrize(
    "prefix",
    [v for k, v in vars(keys).items() if k.endswith("_PREFIX") and k != "ROOT_PREFIX"],
)
def test_architecture_names_every_redis_prefix(prefix: str) -> None:
    text = (DOCS / "architecture.md").read_text()
    short = prefix.removeprefix(keys.ROOT_PREFIX)
    assert f"`{prefix}`" in text or f"`{short}`" in text or short in text


def test_architecture_ttls_match_store_keys() -> None:
    text = (DOCS / "architecture.md").read_text()
    stated = re.findall(r"`([A-Z_]+_SECONDS)` = (\d+) (days|h)", text)
    assert stated, "the architecture page states no TTLs"
    for name, amount, unit in stated:
        seconds = int(amount) * (86400 if unit == "days" else 3600)
        assert getattr(keys, name) == seconds, f"{name} is not {amount} {unit}"


# ``path::name`` or ``path::Class::name``; a bare ``::name`` continues the previous path.
_TEST_REFERENCE = re.compile(r"`((?:tests|e2e)/[\w/]+\.py)?(::[\w:]+)?`")


def test_every_test_named_in_security_md_exists() -> None:
    """The threat model names the test proving each row: a renamed test must not leave it
    pointing at nothing."""
    text = (DOCS / "security.md").read_text()
    path = None
    missing = []
    for match in _TEST_REFERENCE.finditer(text):
        path = match.group(1) or path
        if path is None:
            continue
        source = (ROOT / path).read_text() if (ROOT / path).is_file() else None
        name = (match.group(2) or "").rsplit("::", 1)[-1]
        if source is None or (name and not re.search(rf"(def|class) {name}\b", source)):
            missing.append(f"{path}{match.group(2) or ''}")
    assert not missing, missing
