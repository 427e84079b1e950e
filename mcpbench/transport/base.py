"""The one transport interface: what every shell that carries a `ClientConnection`'s bytes offers.

A transport moves bytes and never decides: the client core (`protocol.client.ClientConnection`)
says what to send (`Outgoing`) and reads what comes back. What the server sends is handed on raw,
as items: `Opened` when an HTTP answer's head arrives, `Arrival` for each chunk of a body or of
stdout (`b""` at its end), `Lost` when I/O failed. `receive(item)` feeds one item to the core and
returns its events (h11 style: whoever owns the connection feeds it). Where the items go is the
owner's choice:

- a `sink` (the blocking shells, `threads.py`): the transport's threads queue items, the thread
  that owns the connection takes them (`next_item`) and hands each to `receive`;
- a `dispatch` (the gevent shells, `green.py`, under one hub): `attach(conn, dispatch)`, and what
  arrives is fed to the core where it is read, its events passed to `dispatch`.

`MockTransport(handler)` (`mock.py`) is a transport whose server is a function, for either owner.
"""

import queue
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcpbench.protocol import http as mcphttp
from mcpbench.protocol.client import STDOUT, AnswerReader, ClientConnection, Event, GetHead, Outgoing, PostHead
from mcpbench.protocol.transports import STDIO

# The streams a transport reads besides the answers to its POSTs (which are numbered); stdout is
# the core's own channel, `STDOUT`.
GET, LEGACY_STREAM = "get", "legacy"


@dataclass(frozen=True, slots=True)
class Opened:
    """The head of an HTTP answer: to the POST of `out`, or of the `GET` stream (`out` None)."""

    stream: Any
    out: Outgoing | None
    status: int
    content_type: str | None
    session_id: str | None
    ts: float
    authenticate: str | None = None  # the `WWW-Authenticate` challenge of a 401 or 403
    headers: Any = None  # all of the head's headers (an `http.client.HTTPMessage`), where a caller reads more
    sent: float | None = None  # perf_counter time the request left, where the shell knows it


@dataclass(slots=True)  # one per answer on the replay's critical path: not frozen, whose `__init__` costs 3x
class Arrival:
    """Raw bytes of one stream (a POST's answer, the GET stream, stdout); `b""` at its end."""

    stream: Any
    data: bytes
    ts: float  # time.perf_counter() at arrival


@dataclass(frozen=True, slots=True)
class Lost:
    """I/O failed: the POST of `out` could not be made or read, or the whole transport broke (`fatal`)."""

    reason: str
    out: Outgoing | None = None
    fatal: bool = False
    ts: float = 0.0
    failure: str | None = None  # its `http.Failure` class where the shell tells (CONNECT otherwise)
    closed: bool = False  # the peer closed the connection without any answer (no status line)


Item = Opened | Arrival | Lost
Sink = Callable[[Item], None]
Dispatch = Callable[[list[Event]], None]


class Transport:
    """Moves one session's bytes to and from a server.

    `connect(conn)` (or `attach` then `open`) starts carrying `conn`; `send(out)` sends one message
    and never waits for its answer unless the shell reads it inline (gevent); `receive(item)` feeds
    what arrived; `close()` ends it all (idempotent). The rest have a default that does nothing:
    `listen` (the session's `GET` stream), `end_session` (an HTTP DELETE), `alive`.
    """

    #: The core's name for the transport ("stdio", "sse", "streamable-http").
    kind: str = STDIO
    #: The URL the connection is built with (the MCP endpoint, the legacy `GET /sse`), if any.
    url: str | None = None
    #: The session is named by a header (Streamable HTTP), not by the connection it lives on.
    has_session_header = False
    #: The server instance that answered the last exchange, as a lab balancer names it
    #: (`X-Mcpbench-Instance`); the load client reads and clears it after each step.
    instance: str | None = None
    #: perf_counter time of the first SSE event of the last answer read on a POST (time to first event).
    first_event: float | None = None

    conn: ClientConnection | None = None
    sink: Sink | None = None
    dispatch: Dispatch | None = None
    #: Sees the failures that concern no call (a `GET` stream refused with 409: one is open already).
    refused: Dispatch | None = None

    def __init__(self) -> None:
        self._readers: dict[Any, Callable[[bytes, float], list[Event]]] = {}

    def attach(self, conn: ClientConnection, dispatch: Dispatch, refused: Dispatch | None = None) -> None:
        """Carry `conn`'s messages from now on, its events to `dispatch` (a new session on the same transport, say)."""
        self.conn, self.dispatch, self.refused = conn, dispatch, refused

    def open(self) -> None:
        """Connect an attached transport (a process, a stream); raises the shell's failure."""
        self.dispatch(self.connect(self.conn))

    def connect(self, conn: ClientConnection) -> list[Event]:
        """Start carrying `conn`; returns what the server said while connecting."""
        self.conn = conn
        return []

    def send(self, out: Outgoing) -> int:
        """Send `out`; returns the bytes exchanged when the shell knows them (else 0)."""
        raise NotImplementedError

    def deliver(self, item: Item) -> None:
        """Hand on what arrived: queued to the sink, or fed to the core here and its events dispatched."""
        if self.sink is not None:
            self.sink(item)
        else:
            self.dispatch(self.receive(item))

    def receive(self, item: Item) -> list[Event]:
        """Feed one item to the connection (on the thread that owns it); its events."""
        if type(item) is Arrival:
            reader = self._readers.get(item.stream)
            if reader is None:
                return []
            if not item.data:
                del self._readers[item.stream]
            return reader(item.data, item.ts)
        if type(item) is Opened:
            self._opened(item)
            return []
        if item.out is not None:
            return self.conn.fail(item.reason, item.failure or mcphttp.Failure.CONNECT, out=item.out)
        return []

    def _opened(self, item: Opened) -> None:
        """An HTTP answer's head: its body is read by the core's reader for it from now on."""
        if item.out is None:  # the GET stream
            reader = self.conn.reader(GetHead(item.status, item.content_type, authenticate=item.authenticate))
        else:
            reader = self.conn.reader(PostHead(item.out, item.status, item.content_type, item.session_id, item.authenticate))
        if reader is not None:
            self._readers[item.stream] = self._reader_for(item.stream, reader)

    def _reader_for(self, stream: Any, reader: AnswerReader) -> Callable[[bytes, float], list[Event]]:
        return reader.feed

    def next_item(self, items: queue.SimpleQueue, timeout: float) -> Item | None:
        """The next thing that arrived, waiting at most `timeout` seconds (0: not at all); None if nothing came."""
        try:
            return items.get(timeout=timeout) if timeout > 0 else items.get_nowait()
        except queue.Empty:
            return None

    def next_exchange(self, deadline: float, *, extra: dict[str, str] | None = None, bare: bool = False) -> None:
        """Bound the next exchange (a shell that reads one at a time, `exchange.py`): its deadline
        (`time.monotonic()`), `extra` headers (they win), `bare`: without the user's headers."""

    def cut(self) -> None:
        """From the sink: end the stream being read now (a shell that reads one exchange at a time)."""

    def hurry(self, until: float) -> None:
        """From the sink: the answer is in; read the rest of the stream only until `until`."""

    def listen(self) -> None:
        """Open the session's `GET` stream (Streamable HTTP); nothing elsewhere."""

    def stop_listening(self) -> None:
        """Close the session's `GET` stream, if one is open."""

    def end_session(self, headers: dict[str, str]) -> int:
        """End the session on the server (HTTP DELETE); the bytes read."""
        return 0

    @property
    def alive(self) -> bool:
        return True

    def close(self) -> None:
        """End the session and release everything; idempotent."""

    def __enter__(self) -> "Transport":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def shut_socket(sock: socket.socket | None) -> None:
    """Shut a socket another thread may be blocked reading: the read returns at once."""
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


__all__ = ["GET", "LEGACY_STREAM", "Arrival", "Dispatch", "Item", "Lost", "Opened", "Sink", "Transport", "shut_socket"]
