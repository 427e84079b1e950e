"""How the reference server can be made to behave like servers in the wild: the states `mcpbench probe` tells apart.

The official SDK's defaults are what the specification asks; deployments differ. Each quirk is one
`lab serve` / `lab up` option, so the lab can be put into the state a probe check must catch:

- `--unknown-session-status 400`: an unknown or ended `Mcp-Session-Id` gets 400, as some SDKs
  answer ("Bad Request: No valid session ID provided"), not the 404 that tells a client to start over;
- `--no-host-check`: no DNS-rebinding protection (a foreign `Host` or `Origin` is served);
- `--ignore-version-header`: `MCP-Protocol-Version` is not read, as by servers older than
  2025-06-18 (a version that does not exist is served, not refused with 400);
- `--no-delete`: `DELETE` is refused with 405 (sessions end only when the server times them out);
- `--max-sessions N`: at most N sessions open at once (the SDK answers 503 beyond);
- `--leaky-events` (with `--resumable`): the event store replays any session's events to whoever
  names their id (`event_store.py`);
- `--replay-pause SECONDS` (with `--resumable`): a resumed stream goes live only this long after
  its replay, so what the request sends meanwhile is stored but sent on no stream: the official
  SDK's replay-to-live window (one await there), made wide enough to be hit on purpose;
- `--rewrite-method-header`: a gateway in front sets `Mcp-Method` (and `Mcp-Name`) from the body, as
  one that routes by the body does, so the server never sees a header that disagrees with the body
  (2026-07-28 asks it to refuse one with 400 and -32020: a gateway routing on the header while the
  server runs the body is what the rule stops).

`Quirks` is plain data (no `mcp` import): the command line builds it, `servers.serve_argv` turns it
back into arguments, and `reference_server.serve` applies it (the middlewares below).
"""

from dataclasses import dataclass
from typing import Final

from mcpbench.protocol.http import METHOD, NAME
from mcpbench.protocol.jsonrpc import Request
from mcpbench.protocol.observer import Observed, read_body
from mcpbench.protocol.session import C2S
from mcpbench.protocol.versions import header_name_key

SESSION_HEADER: Final = b"mcp-session-id"
VERSION_HEADER: Final = b"mcp-protocol-version"
UNKNOWN_SESSION_STATUSES: Final = (404, 400)


@dataclass(frozen=True, slots=True)
class Quirks:
    """The reference server's departures from the SDK's defaults (none by default)."""

    unknown_session_status: int = 404
    host_check: bool = True
    version_header: bool = True
    delete: bool = True
    max_sessions: int | None = None
    leaky_events: bool = False
    method_header: bool = True
    replay_pause: float = 0.0

    def argv(self) -> list[str]:
        """The `lab serve` arguments that give these quirks."""
        out = [] if self.unknown_session_status == 404 else ["--unknown-session-status", str(self.unknown_session_status)]
        out += ["--no-host-check"] * (not self.host_check) + ["--ignore-version-header"] * (not self.version_header)
        out += ["--no-delete"] * (not self.delete)
        out += ["--max-sessions", str(self.max_sessions)] if self.max_sessions is not None else []
        out += ["--replay-pause", f"{self.replay_pause:g}"] if self.replay_pause else []
        return out + ["--leaky-events"] * self.leaky_events + ["--rewrite-method-header"] * (not self.method_header)

    def wrap(self, app):
        """`app` (ASGI) with the middlewares these quirks need."""
        if self.unknown_session_status != 404:
            app = UnknownSessionStatus(app, self.unknown_session_status)
        if not self.delete:
            app = RefuseDelete(app)
        if not self.version_header:
            app = IgnoreVersionHeader(app)
        if not self.method_header:
            app = RewriteMethodHeader(app)
        return app


class UnknownSessionStatus:
    """ASGI middleware: a 404 to a request that named a session (the session is unknown) gets `status` instead."""

    def __init__(self, app, status: int) -> None:
        self.app = app
        self.status = status

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not any(name.lower() == SESSION_HEADER for name, _ in scope["headers"]):
            await self.app(scope, receive, send)
            return

        async def restatus(message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 404:
                message = {**message, "status": self.status}
            await send(message)

        await self.app(scope, receive, restatus)


class RefuseDelete:
    """ASGI middleware: `DELETE` is answered 405 (Allow: GET, POST) and never reaches the server."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "DELETE":
            await self.app(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 405, "headers": [(b"allow", b"GET, POST"), (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})


class IgnoreVersionHeader:
    """ASGI middleware: requests reach the server without their `MCP-Protocol-Version` header."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            scope = {**scope, "headers": [(n, v) for n, v in scope["headers"] if n.lower() != VERSION_HEADER]}
        await self.app(scope, receive, send)


class RewriteMethodHeader:
    """ASGI middleware, a gateway's quirk: each POST's `Mcp-Method` and `Mcp-Name` are set from its body
    (read whole first, then handed on unchanged), whatever the client sent."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        messages, body = [], b""
        while True:
            message = await receive()
            messages.append(message)
            body += message.get("body", b"") if message["type"] == "http.request" else b""
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        seen = read_body(body, C2S)  # the core reads the body; this gateway only looks
        request = seen[0].message if seen and type(seen[0]) is Observed else None
        if type(request) is Request:
            key = header_name_key(request.method)
            name = request.params.get(key) if key and isinstance(request.params, dict) else None
            names = {METHOD.encode(), NAME.encode()}
            headers = [(n, v) for n, v in scope["headers"] if n.lower() not in names]
            headers.append((METHOD.encode(), request.method.encode()))
            if isinstance(name, str):
                headers.append((NAME.encode(), name.encode()))
            scope = {**scope, "headers": headers}

        async def replay():
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)
