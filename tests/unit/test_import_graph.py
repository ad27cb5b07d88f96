"""The package's import graph has no cycle, its tree reads as its architecture, and the
engine's functions stay short.

Aspects covered:
- no module of ``agentchain`` reaches itself through its imports (grimp, which
  import-linter installs, builds the graph; imports inside functions count too, so a
  cycle cannot hide in one);
- no cycle between the groups (``hop``, ``flow``, ``github``, ...), where each group's
  ``rules`` package counts as a node of its own: rules are one layer under every
  group's I/O side, so ``core`` may use ``hop.rules`` while ``hop`` uses ``core``;
- a ``rules`` module imports only rules, models and settings (``.importlinter`` says the
  same of the I/O libraries);
- no module name appears twice anywhere in the package, and no package directly holds
  more than 12 modules: one home per concept, and a tree a reader can take in;
- no function on the engine's I/O side (the hop, the features, the core) is over 50
  lines: the hop reads as a sequence of small steps.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import grimp
import pytest

import agentchain

PACKAGE = Path(agentchain.__file__).parent
ENGINE_GROUPS = ("hop", "core", "flow", "github", "prompts", "workspaces", "aiagents")
MAX_FUNCTION_LINES = 50
MAX_MODULES_PER_PACKAGE = 12
RULES_MAY_IMPORT = ("agentchain.models", "agentchain.settings")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("agentchain", include_external_packages=False)


def _cycle_through(graph: grimp.ImportGraph, module: str) -> list[str] | None:
    """A shortest cycle from ``module`` back to itself, if any."""
    for imported in sorted(graph.find_modules_directly_imported_by(module)):
        if imported == module or module.startswith(f"{imported}."):
            continue  # The package's own __init__: not a cycle of modules.
        back = graph.find_shortest_chain(importer=imported, imported=module)
        if back is not None:
            return [module, *back]
    return None


def test_no_module_imports_itself_through_others(graph: grimp.ImportGraph) -> None:
    cycles = {m: c for m in sorted(graph.modules) if (c := _cycle_through(graph, m))}
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles.values())


def _node(module: str) -> str:
    """A module's group, or its group's rules: the nodes the groups' graph is made of."""
    parts = module.split(".")
    if "rules" in parts:
        return ".".join(parts[: parts.index("rules") + 1])
    return ".".join(parts[:2])


def _groups_graph(graph: grimp.ImportGraph) -> grimp.ImportGraph:
    squashed = grimp.ImportGraph()
    for module in graph.modules:
        squashed.add_module(_node(module))
        for imported in graph.find_modules_directly_imported_by(module):
            if _node(imported) != _node(module):
                squashed.add_import(importer=_node(module), imported=_node(imported))
    return squashed


def test_no_cycle_between_groups(graph: grimp.ImportGraph) -> None:
    groups = _groups_graph(graph)
    cycles = {g: c for g in sorted(groups.modules) if (c := _cycle_through(groups, g))}
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles.values())


def test_rules_import_only_rules_models_and_settings(graph: grimp.ImportGraph) -> None:
    rules = sorted(m for m in graph.modules if ".rules" in m)
    assert len(rules) > 30  # Not a vacuous pass: every group's rules are seen.
    impure = {
        module: sorted(
            imported
            for imported in graph.find_modules_directly_imported_by(module)
            if ".rules" not in imported and not imported.startswith(RULES_MAY_IMPORT)
        )
        for module in rules
    }
    assert not {m: i for m, i in impure.items() if i}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py")


def test_no_module_name_appears_twice() -> None:
    names = Counter(path.stem for path in _modules())
    twice = {
        name: [str(p.relative_to(PACKAGE)) for p in _modules() if p.stem == name]
        for name, count in names.items()
        if count > 1 and name != "__main__"
    }
    assert not twice


def test_no_package_holds_more_than_12_modules() -> None:
    crowded = {
        str(package.relative_to(PACKAGE.parent)): count
        for package in [PACKAGE, *(p.parent for p in PACKAGE.rglob("__init__.py"))]
        if (count := len([m for m in package.glob("*.py") if m.name != "__init__.py"]))
        > MAX_MODULES_PER_PACKAGE
    }
    assert not crowded


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                found.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    return found


def _engine_modules() -> list[Path]:
    return sorted(path for group in ENGINE_GROUPS for path in (PACKAGE / group).glob("*.py"))


def test_no_engine_function_is_over_50_lines() -> None:
    long = [f for path in _engine_modules() for f in _long_functions(path)]
    assert not long, long


def test_the_checks_see_the_engine() -> None:
    """Guard against a vacuous pass: the engine's modules are where the checks look."""
    assert len(_engine_modules()) > 30
    assert "agentchain.hop.hopping" in grimp.build_graph("agentchain").modules


def test_a_cycle_is_found_when_there_is_one() -> None:
    made = grimp.ImportGraph()
    made.add_import(importer="p.a", imported="p.b")
    made.add_import(importer="p.b", imported="p.c")
    made.add_import(importer="p.c", imported="p.a")
    assert _cycle_through(made, "p.a") == ["p.a", "p.b", "p.c", "p.a"]
    assert _node("agentchain.hop.rules.chains") == "agentchain.hop.rules"
    assert _node("agentchain.hop.hopping") == "agentchain.hop"
    assert _long_functions(Path(__file__)) == []
