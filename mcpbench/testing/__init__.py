"""mcpbench in a user's test suite: the pytest plugin and what it is made of.

- `plugin.py`: the pytest plugin (entry point `pytest11`): the `--mcp-record-mode` option, the
  `mcp_trace` marker and the fixtures `mcp_mock` (client code against a recorded server) and
  `mcp_replay` (server code against its recordings). Nothing runs unless a test asks for a fixture.
- `settings.py`: record modes, what a mode does with a trace, and a test's settings (no I/O).
- `mock.py`: the mock a test points its client at (serve-trace in-process or as a stdio command),
  or the real server behind a recorder while recording.
- `record_stdio.py`: the stdio recorder command a recording test's client starts.
- `regress.py`: `replay_trace`, which replays a trace against a server and raises
  `ReplayChanged` (an `AssertionError`) naming each changed path.

Importing this package is cheap: the names below load their module when first used.
"""

from typing import Any

__all__ = ["McpMock", "ReplayChanged", "replay_trace"]

_HOMES = {"McpMock": "mcpbench.testing.mcp_mock", "ReplayChanged": "mcpbench.testing.regress",
          "replay_trace": "mcpbench.testing.regress"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
