"""mcpbench: record, replay and load-test Model Context Protocol traffic."""

__version__ = "0.1.0"
