"""Top-level pytest wiring: plugins shared by tests/ and e2e/."""

pytest_plugins = ["e2e.operator_fixtures"]
