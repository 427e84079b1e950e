"""`MockTransport(handler)`: a transport whose server is a function (httpx's model), so any client
path is tested without a server, a process or a socket.

    def server(message):                                  # each message the client sends
        if message.method == "tools/call":
            return [Response(id=message.id, result={})]   # what the server sends back, in order
        return []                                         # nothing: the answer never comes

    MockTransport(server, sink=queue.put)                 # a blocking owner (the replayer): items to `sink`
    MockTransport(server, kind=STREAMABLE_HTTP)           # a gevent owner (the load client): `attach(conn, dispatch)`

What a handler returns is carried as the transport of `kind` would carry it: on stdio each message
is a line of stdout; on Streamable HTTP each POST gets its own answer, an SSE stream of the
messages, ended after them (a message that wants no answer and gets none is accepted with 202, a
request that gets none is left open); on legacy HTTP+SSE the stream names its endpoint as it
opens, each POST is accepted with 202 and the messages come on the stream. `CUT` in the list ends
the stream there: stdout or the legacy stream closes (the session is gone with it), a POST's
stream closes (before its answer, if the answer was not in it yet).
"""

import itertools
import time
from collections.abc import Callable, Iterable
from typing import Any

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.client import STDOUT, ClientConnection, EndpointReady, Event, LegacyHead, Outgoing
from mcpbench.protocol.media import EVENT_STREAM
from mcpbench.protocol.jsonrpc import Message, Request
from mcpbench.protocol.transports import LEGACY_SSE, STDIO
from mcpbench.protocol.versions import has_handshake
from mcpbench.transport.base import LEGACY_STREAM, Arrival, Opened, Sink, Transport

# In a handler's answer: the stream ends here.
CUT = "cut"

Handler = Callable[[Message], Iterable[Any] | None]


class MockTransport(Transport):
    """A transport of `kind` whose server is `handler(message) -> what the server sends` (see the module).

    Args:
        handler: the server.
        sink: where items go for a blocking owner; none: an attached client's `dispatch` gets the events.
        kind: the transport it stands for (`protocol.transports`).
        url: the URL an HTTP kind is built with (the MCP endpoint, the legacy `GET /sse`).
        session_id: the session id a Streamable HTTP answer names in a handshake era; the legacy endpoint's.
    """

    def __init__(self, handler: Handler, sink: Sink | None = None, *, kind: str = STDIO, url: str | None = None,
                 session_id: str = "mock-session") -> None:
        super().__init__()
        self.handler = handler
        self.sink = sink
        self.kind = kind
        self.url = url if url is not None or kind == STDIO else f"http://mock.invalid/{'sse' if kind == LEGACY_SSE else 'mcp'}"
        self.session_id = session_id
        self.has_session_header = kind not in (STDIO, LEGACY_SSE)
        self.sent: list[Message] = []
        self.ended = False  # stdout or the legacy stream closed: the transport carries nothing more
        self._posts = itertools.count(1)

    def connect(self, conn: ClientConnection) -> list[Event]:
        super().connect(conn)
        if self.kind != LEGACY_SSE:
            self._readers[STDOUT] = self._stdout
            return []
        self._readers[LEGACY_STREAM] = conn.reader(LegacyHead(200, EVENT_STREAM)).feed
        endpoint = f"event: endpoint\ndata: /messages?session_id={self.session_id}\n\n".encode()
        return [e for e in self.receive(Arrival(LEGACY_STREAM, endpoint, time.perf_counter())) if type(e) is not EndpointReady]

    def _stdout(self, data: bytes, ts: float) -> list[Event]:
        return self.conn.reader(STDOUT).feed(data, ts)

    @property
    def alive(self) -> bool:
        return not self.ended

    def send(self, out: Outgoing) -> int:
        self.sent.append(out.message)
        replies = list(self.handler(out.message) or ())
        if self.kind == STDIO:
            self._over(STDOUT, replies, lambda reply: jsonrpc.encode(reply) + b"\n")
        elif self.kind == LEGACY_SSE:
            stream = next(self._posts)
            self.deliver(Opened(stream, out, 202, None, None, time.perf_counter()))
            self.deliver(Arrival(stream, b"", time.perf_counter()))
            self._over(LEGACY_STREAM, replies, _event)
        else:
            self._over_post(out, replies)
        return len(out.data)

    def _over(self, stream: str, replies: list, encode: Callable[[Message], bytes]) -> None:
        """Replies on the stream the whole session lives on (stdout, the legacy stream); `CUT` closes it."""
        for reply in replies:
            if self.ended:
                return
            if reply == CUT:
                self.ended = True
                self.deliver(Arrival(stream, b"", time.perf_counter()))
            else:
                self.deliver(Arrival(stream, encode(reply), time.perf_counter()))

    def _over_post(self, out: Outgoing, replies: list) -> None:
        stream = next(self._posts)
        session = self.session_id if has_handshake(self.conn.version) else None
        if not replies and type(out.message) is not Request:  # accepted: nothing to say
            self.deliver(Opened(stream, out, 202, None, session, time.perf_counter()))
            self.deliver(Arrival(stream, b"", time.perf_counter()))
            return
        self.deliver(Opened(stream, out, 200, EVENT_STREAM, session, time.perf_counter()))
        for reply in replies:
            if reply == CUT:
                break
            self.deliver(Arrival(stream, _event(reply), time.perf_counter()))
        else:
            if not replies:
                return  # a request without its answer: the stream stays open
        self.deliver(Arrival(stream, b"", time.perf_counter()))


def _event(message: Message) -> bytes:
    return b"event: message\ndata: " + jsonrpc.encode(message) + b"\n\n"


__all__ = ["CUT", "MockTransport"]
