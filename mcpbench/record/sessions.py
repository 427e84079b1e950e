"""Session keys, and the state of every session the recording addon has seen.

A session key is what a trace's `session` field holds (docs/trace-format-http.md):

- Streamable HTTP: the request's `Mcp-Session-Id`, or the one its `initialize` answer mints;
  sessionless traffic gets `conn-<12 hex>`, one key per client connection (`conn_key`).
- Legacy HTTP+SSE: derived from the `endpoint` event's URI (`protocol.http.legacy_session_key`); POSTs to that
  endpoint are matched back to it (`SessionBook.endpoint_session`).

`SessionBook` keeps one protocol-core `Session` per key and returns the violations each message
breaks; it holds no I/O, the addon writes what it returns.
"""

from collections import OrderedDict
from urllib.parse import urlsplit

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.rules import whole_session_codes
from mcpbench.protocol.session import Direction, Session, Violation
from mcpbench.protocol.transports import LEGACY_SSE, STREAMABLE_HTTP

# Sessionless key: "conn-" + the first 12 hex digits of mitmproxy's client connection id (a UUID4:
# 48 random bits, so keys of one recording do not collide in practice).
CONN_PREFIX = "conn-"
CONN_ID_HEX = 12

# Lifecycle checks that a per-connection key cannot make: without a session id, a client's
# `initialize` and its later requests may travel on different connections (the SDK opens a new one
# after each streamed answer), so on a `conn-…` key these would be false alarms.
CROSS_CONNECTION_CODES = whole_session_codes()

# Sessions whose state is kept at once (a few KiB each), the least recently active dropped first:
# over a long recording, clients often leave without DELETE.
MAX_LIVE_SESSIONS = 10_000


def conn_key(connection_id: str) -> str:
    """The session key of sessionless traffic on one client connection."""
    return CONN_PREFIX + connection_id.replace("-", "")[:CONN_ID_HEX]


def endpoint_target(url: str) -> tuple[str, int, str]:
    """(host, port, path?query) of a URL: what a legacy POST is matched on."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return (parts.hostname or "").lower(), port, path


class SessionBook:
    """The sessions of one recording by key, and the legacy endpoints that name them."""

    def __init__(self) -> None:
        self.sessions: OrderedDict[str, Session] = OrderedDict()  # least recently active first
        self._endpoints: dict[tuple[str, int, str], str] = {}  # legacy POST target -> session key

    def observe(self, key: str, direction: Direction, message: jsonrpc.Message, ts: float, *,
                legacy: bool, version: str | None) -> list[Violation]:
        """Show `message` to the session `key`; the violations it breaks.

        A Streamable HTTP session id first seen on anything but `initialize` (the recording began
        mid-session, or its state was dropped) is taken as joined: past its handshake, in protocol
        `version` (its `MCP-Protocol-Version` header) when known.
        """
        sessions = self.sessions
        session = sessions.get(key)
        conn_keyed = key.startswith(CONN_PREFIX)
        if session is not None:
            sessions.move_to_end(key)
        else:
            opening = type(message) is jsonrpc.Request and message.method == "initialize"
            transport = LEGACY_SSE if legacy else STREAMABLE_HTTP
            session = Session(transport=transport) if conn_keyed or legacy or opening else Session.joined(version, transport)
            sessions[key] = session
            if len(sessions) > MAX_LIVE_SESSIONS:
                sessions.popitem(last=False)
        return [
            item for item in session.observe(direction, message, ts)
            if type(item) is Violation and not (conn_keyed and item.code in CROSS_CONNECTION_CODES)
        ]

    def close(self, key: str, *, keep: bool) -> list[Violation]:
        """End the session `key`; `keep` it to flag messages that still come. Its violations."""
        session = self.sessions.get(key) if keep else self.sessions.pop(key, None)
        if session is None:
            return []
        return [item for item in session.close() if type(item) is Violation]

    def __contains__(self, key: str) -> bool:
        return key in self.sessions

    def keys(self) -> list[str]:
        return list(self.sessions)

    def add_endpoint(self, url: str, key: str) -> None:
        """A legacy stream named `url` as the endpoint of session `key`."""
        self._endpoints[endpoint_target(url)] = key

    def endpoint_session(self, request) -> str | None:
        """The session whose legacy endpoint a POST `request` (its host, port and path) goes to, if any.

        The request's parts are read only when a legacy stream named an endpoint: each is a
        property that decodes bytes, on every proxied request.
        """
        if not self._endpoints:
            return None
        return self._endpoints.get((request.host.lower(), request.port, request.path))

    def forget_endpoints(self, key: str) -> None:
        for target in [t for t, owner in self._endpoints.items() if owner == key]:
            del self._endpoints[target]

    def clear_endpoints(self) -> None:
        self._endpoints.clear()
