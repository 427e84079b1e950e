"""ASGI middleware that writes one JSON line per request a lab server receives (`lab serve --request-log`).

The server's own account of when each request arrived, for tests and experiments that must
not trust the client's clock alone (a reconnect that waits as long as the stream's `retry:` asked)::

    {"t": 1733131495.123456, "method": "GET", "path": "/mcp", "last_event_id": "…", "session": "…"}

`t` is the wall time at arrival. Only headers that say what a request is are kept, never credentials.
"""

import os
import time

# The request headers a line keeps (lower case) and the names it keeps them under.
KEPT = {b"last-event-id": "last_event_id", b"mcp-session-id": "session", b"host": "host"}


class RequestLog:
    """Wraps an ASGI app; appends a line to `path` when each HTTP request's head arrives (flushed at once)."""

    def __init__(self, app, path: str) -> None:
        self.app = app
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            import orjson

            line = {"t": round(time.time(), 6), "method": scope["method"], "path": scope["path"]}
            for name, value in scope["headers"]:
                key = KEPT.get(name.lower())
                if key is not None:
                    line[key] = value.decode("latin-1")
            os.write(self.fd, orjson.dumps(line) + b"\n")  # one write per line: appends never interleave
        await self.app(scope, receive, send)
