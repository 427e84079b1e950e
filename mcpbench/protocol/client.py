"""The client side of a session, free of I/O: ids, handshake and envelopes.

Used by everything in mcpbench that speaks as a client (replayer, load users):

    client = ClientProtocol(version="2025-11-25")
    data = client.send(client.initialize())          # bytes for the transport
    events = client.receive(jsonrpc.decode(answer))  # Exchange, Violation, …
"""

import itertools
import time
from typing import Any

from mcpbench import __version__
from mcpbench.protocol import jsonrpc
from mcpbench.protocol.jsonrpc import Message, Notification, Request
from mcpbench.protocol.session import C2S, S2C, Session, SessionEvent
from mcpbench.protocol.versions import LATEST_HANDSHAKE, Era, envelope, era_of

CLIENT_INFO = {"name": "mcpbench", "version": __version__}


class ClientProtocol:
    """Builds what a client sends and tracks the session it belongs to.

    Args:
        version: the protocol version to speak. A handshake-era version sends
            it in `initialize`; 2026-07-28 puts it in every request's `_meta`.
        capabilities: the client capabilities to declare.
        client_info: the `clientInfo` / `io.modelcontextprotocol/clientInfo` object.
    """

    def __init__(
        self,
        version: str = LATEST_HANDSHAKE,
        *,
        capabilities: dict | None = None,
        client_info: dict | None = None,
    ) -> None:
        if era_of(version) is None:
            raise ValueError(f"unknown protocol version {version!r}")
        self.version = version
        self.capabilities = capabilities or {}
        self.client_info = client_info or CLIENT_INFO
        self.session = Session(version if era_of(version) is Era.STATELESS else None)
        self._ids = itertools.count(1)

    @property
    def stateless(self) -> bool:
        return era_of(self.version) is Era.STATELESS

    def next_id(self) -> int:
        return next(self._ids)

    def initialize(self) -> Request:
        """The `initialize` request (handshake era only)."""
        return Request(
            id=self.next_id(),
            method="initialize",
            params={"protocolVersion": self.version, "capabilities": self.capabilities, "clientInfo": self.client_info},
        )

    def initialized(self) -> Notification:
        return Notification(method="notifications/initialized")

    def request(self, method: str, params: dict[str, Any] | None = None) -> Request:
        """A request with a fresh id; in 2026-07-28 it carries the `_meta` envelope."""
        if self.stateless:
            params = dict(params or {})
            meta = dict(params.get("_meta") or {})
            meta.update(envelope(self.version, capabilities=self.capabilities, client_info=self.client_info))
            params["_meta"] = meta
        return Request(id=self.next_id(), method=method, params=params)

    def send(self, message: Message, ts: float | None = None) -> tuple[bytes, list[SessionEvent]]:
        """Encode `message` and let the session see it leave."""
        events = self.session.observe(C2S, message, time.perf_counter() if ts is None else ts)
        return jsonrpc.encode(message), events

    def receive(self, message: Message, ts: float | None = None) -> list[SessionEvent]:
        """Let the session see `message` arrive from the server."""
        return self.session.observe(S2C, message, time.perf_counter() if ts is None else ts)
