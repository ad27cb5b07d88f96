"""Top-level pytest wiring: plugins shared by tests/ and e2e/."""

# Imported now rather than by hypothesis's own plugin at the terminal summary: a run of
# e2e tests alone (which use no hypothesis) otherwise compiles hypothesis at the very end,
# and CPython 3.11.7 can fail that compile with "AST constructor recursion depth
# mismatch", turning a green run red.
import hypothesis  # noqa: F401

pytest_plugins = ["e2e.operator_fixtures"]
