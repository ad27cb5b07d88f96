"""The package's import graph has no cycle, and the engine's functions stay short.

Aspects covered:
- no module of ``agentchain`` reaches itself through its imports (grimp, which
  import-linter installs, builds the graph; imports inside functions count too, so a
  cycle cannot hide in one);
- a package imports its own submodules only downwards: no cycle between packages
  either (``agentchain.engine`` importing ``agentchain.kube`` importing
  ``agentchain.engine`` would be one);
- no function in ``agentchain/engine`` is over 50 lines (issue 21: the hop reads as
  a sequence of small steps).
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest

import agentchain

ENGINE = Path(agentchain.__file__).parent / "engine"
MAX_FUNCTION_LINES = 50


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


def test_no_cycle_between_subpackages(graph: grimp.ImportGraph) -> None:
    packages = sorted(m for m in graph.modules if m.count(".") == 1)
    for package in packages:
        if graph.find_children(package):
            graph.squash_module(package)
    cycles = {p: c for p in packages if (c := _cycle_through(graph, p))}
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles.values())


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                found.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_engine_function_is_over_50_lines() -> None:
    long = [f for path in sorted(ENGINE.glob("*.py")) for f in _long_functions(path)]
    assert not long, long


def test_the_checks_see_the_engine() -> None:
    """Guard against a vacuous pass: the engine's modules are where the checks look."""
    assert len(list(ENGINE.glob("*.py"))) > 10
    assert "agentchain.engine.hopping" in grimp.build_graph("agentchain").modules


def test_a_cycle_is_found_when_there_is_one() -> None:
    made = grimp.ImportGraph()
    made.add_import(importer="p.a", imported="p.b")
    made.add_import(importer="p.b", imported="p.c")
    made.add_import(importer="p.c", imported="p.a")
    assert _cycle_through(made, "p.a") == ["p.a", "p.b", "p.c", "p.a"]
    assert _long_functions(Path(__file__)) == []
