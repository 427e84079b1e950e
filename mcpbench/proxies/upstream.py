"""A proxy's kept-alive upstream connections: a dead or long-idle one is closed before a request can go on it.

mitmproxy keeps the upstream connections of each client connection open between requests and sends
the next request on one whenever it is still `connected` (`HttpLayer.get_connection`): no check of
the socket, no age limit, and no option for either in mitmproxy 12 (its `tcp_timeout` is the client
side's idle limit). An upstream closes an idle connection on a timer of its own (uvicorn after 5 s),
and a request that comes as that close is under way, or before mitmproxy has read the close, is
written to a dying connection: "server closed connection", a 502 to the client, for a request the
upstream may never have read (68 and 81 of them through `record` and the balancer in the soak of
100 sessions).

So just before a request goes upstream (the end of the last `request` hook, after any routing),
`FreshUpstream.before` closes each upstream connection of the flow's client connection that is
dead (its socket readable while idle: the upstream's FIN, a reset or bytes nobody asked for are in;
or its end already read) or has been idle for `KEEP_ALIVE_EXPIRY` or longer. It closes it as
mitmproxy's own `CloseConnection` command does (`ConnectionHandler.close_connection`), which marks it
closed at once, so mitmproxy opens a new one for this request. Only for an HTTP/1 client: its
connection carries one request at a time, so every upstream connection of it is idle when a request
comes (mitmproxy gives an HTTP/2 client's requests an upstream connection each).

Not an addon of its own: the recording addon and the balancer call it from their hooks (`before`
from `request`, `after` from `response` and `error`), since each addon object costs a dispatch per
event (`proxies/host.py`).
"""

from __future__ import annotations

import select
import time
import weakref

from mcpbench.protocol.http import KEEP_ALIVE_EXPIRY

HTTP1 = ("HTTP/1.0", "HTTP/1.1")


class FreshUpstream:
    """Closes the dead and the long-idle upstream connections of a flow's client connection before its
    request goes upstream."""

    def __init__(self, expiry: float = KEEP_ALIVE_EXPIRY) -> None:
        self.expiry = expiry
        self._idle_since: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Server -> when its last answer ended
        self.closed = 0  # connections closed here (dead or expired): for tests and a run's account

    def after(self, flow) -> None:
        """The flow's exchange is over (its `response` or `error` hook): its upstream connection idles from now."""
        server = flow.server_conn
        if server is not None and server.connected:
            self._idle_since[server] = time.monotonic()

    def before(self, flow) -> None:
        """The flow's request goes upstream when this hook returns: close what mitmproxy must not reuse."""
        if flow.response is not None or flow.request.http_version not in HTTP1:
            return
        from mitmproxy import ctx
        from mitmproxy.connection import Server

        # No master when the addon runs outside mitmproxy's loop (`trace import --har` feeds it flows).
        master = getattr(ctx, "master", None)
        proxyserver = master.addons.get("proxyserver") if master is not None else None
        handler = proxyserver.connections.get(flow.client_conn.id) if proxyserver else None
        if handler is None:
            return
        now = time.monotonic()
        for conn, io in list(handler.transports.items()):
            if type(conn) is not Server or not conn.connected:
                continue
            since = self._idle_since.get(conn)
            if (since is not None and now - since >= self.expiry) or _dead(io):
                self._idle_since.pop(conn, None)
                handler.close_connection(conn)
                self.closed += 1


def _dead(io) -> bool:
    """Whether an idle upstream connection can carry no request: its end already read, or its socket
    readable (an idle HTTP/1 connection has nothing to say until asked)."""
    reader, writer = io.reader, io.writer
    if reader is None or writer is None or writer.is_closing():
        return True
    at_eof = getattr(reader, "at_eof", None)
    if at_eof is not None and at_eof():
        return True
    sock = writer.get_extra_info("socket")
    if sock is None:
        return False  # not a socket of ours to look at (mitmproxy_rs streams): left to mitmproxy
    try:
        readable, _, _ = select.select([sock.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
