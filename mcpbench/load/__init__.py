"""Load runs with Locust over stdio, legacy SSE and Streamable HTTP.

`from mcpbench.load import StdioUser, SseUser, StreamableHttpUser` imports Locust
(which monkey-patches the process with gevent); the names are resolved lazily so
that `mcpbench.load.scenario`, `runner` and `cli` stay free of Locust and usable
from the CLI process.
"""

from typing import Any

__all__ = ["McpUser", "SseUser", "StdioUser", "StreamableHttpUser"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from mcpbench.load import users

        return getattr(users, name)
    raise AttributeError(f"module 'mcpbench.load' has no attribute {name!r}")
