"""The SDK-driven session the tests compare: see mcpbench.lab.drive."""

from mcpbench.lab.drive import drive as run_session  # noqa: F401
