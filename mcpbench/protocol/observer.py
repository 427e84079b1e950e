"""The observer role: one reader of one direction of MCP traffic, free of I/O.

A recorder, a balancer or a client watching a stream sees bytes pass; an observer says what they
are: the JSON-RPC messages they carry (each with the exact JSON text it came in, which a trace
splices in unchanged), the framing rules they break (a `Violation` with a code of `rules.py` and
the offending bytes) and the legacy transport's `endpoint` event. The session's rules are not
checked here: feed each `Observed.message` to a `session.Session`.

One observer per direction and framing:

- `StdioObserver`: a stdio session's stdin (C2S) or stdout (S2C), a message per line;
- `BodyObserver`: one HTTP request or answer body, whole or in chunks (`read_body` for a whole one);
- `SseObserver`: one SSE stream (the answer to a POST, the GET stream, the legacy `GET /sse`).

Each is used as h11's connection is: `receive_data(data)` buffers (`b""` marks the end) and
`next_event()` returns one event, or `NEED_DATA`, or `EOF` once every event of an ended stream has
been handed out. `feed(data)` does both and returns every event `data` completes: the hot path.

    observer = StdioObserver(S2C)
    for event in observer.feed(chunk): ...      # Observed, Violation
    events = observer.feed(b"")                 # the end: a line cut short is reported now

Events:

- `Observed(message, raw, sse)`: a message, a batch being one;
- `session.Violation(code, detail, direction, raw)`: `not-json`, `stdout-pollution`,
  `invalid-message`, `line-too-long`, `unterminated-line` (stdio); `empty-body`, `not-json`,
  `invalid-message` (bodies); `not-json`, `invalid-message`, `sse-truncated`,
  `sse-line-too-long`, `sse-undecodable` (SSE);
- `EndpointEvent(data, sse)`: the legacy stream's `endpoint` event;
- from an SSE stream, the parser's own `SseEvent` (one that carries no message: another type, no
  data, an `id:`/`retry:` alone) and `SseComment`, as `sse.SseParser` gives them.
"""

from collections import deque
from dataclasses import dataclass

import orjson

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.errors import RemoteProtocolError
from mcpbench.protocol.framing import EOF, MAX_LINE_BYTES, NEED_DATA, Line, LineFramer, LineTooLong, Signal
from mcpbench.protocol.media import is_json, looks_json, stream_decoder
from mcpbench.protocol.session import S2C, Direction, Violation
from mcpbench.protocol.sse import SseComment, SseEvent, SseParser, SseTruncated

__all__ = [
    "EOF", "NEED_DATA", "BodyObserver", "EndpointEvent", "Event", "Observed", "ObserverEvent", "SseObserver",
    "StdioObserver", "Violation", "read_body",
]


class Event:
    """Base of the observer's own events (`Observed`, `EndpointEvent`)."""

    __slots__ = ()


@dataclass(slots=True)  # one per message on the recorders' hot paths: not frozen (see jsonrpc.Message)
class Observed(Event):
    """A JSON-RPC message as it passed.

    `raw` is its JSON text exactly as sent: a stdio line without its line ending, an HTTP body, an
    SSE event's data. `sse` is the SSE event that carried it (its `id`, its `event` field), if any.
    """

    message: jsonrpc.Message
    raw: bytes
    sse: SseEvent | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointEvent(Event):
    """The legacy HTTP+SSE stream's `endpoint` event (2024-11-05): where the client POSTs.

    `data` is the URI as the server sent it, relative or absolute and opaque:
    `http.resolve_endpoint` makes it absolute, `http.legacy_session_key` names its session.
    `sse` is the event itself (its `id`, `retry`).
    """

    data: str
    sse: SseEvent


ObserverEvent = Observed | Violation | EndpointEvent | SseEvent | SseComment

_new = object.__new__


def _undecodable(chunk: bytes) -> bytes:
    """The decoder of a stream that failed to decode: whatever comes next is not read."""
    return b""


def _decoded(data: bytes, direction: Direction, not_json: str, sse: SseEvent | None = None) -> Observed | Violation:
    """The message in one JSON text, or the violation that says why there is none."""
    try:
        message = jsonrpc.decode(data)
    except jsonrpc.NotJson as exc:
        return Violation(not_json, exc.reason, direction, data)
    except jsonrpc.InvalidMessage as exc:
        return Violation("invalid-message", exc.reason, direction, data)
    return Observed(message, data, sse)


class _Queued:
    """What every observer shares: events made ahead of `next_event`, and the end of the input."""

    __slots__ = ("direction", "_queue", "_eof")

    def __init__(self, direction: Direction) -> None:
        self.direction = direction
        self._queue: deque[ObserverEvent] = deque()
        self._eof = False

    def next_event(self) -> ObserverEvent | Signal:
        """The next event, `NEED_DATA`, or `EOF` once the input has ended and every event is out."""
        if self._queue:
            return self._queue.popleft()
        return EOF if self._eof else NEED_DATA

    def feed(self, data: bytes) -> list[ObserverEvent]:
        """Receive `data` (`b""`: the end) and return every event it completes."""
        self.receive_data(data)
        events = list(self._queue)
        self._queue.clear()
        return events


# --- stdio -----------------------------------------------------------------------------------


class StdioObserver(_Queued):
    """Reads one direction of a stdio session: a JSON-RPC message per line.

    MCP stdio (every version): "Messages are delimited by newlines, and MUST NOT contain embedded
    newlines"; the server "MUST NOT write anything to its stdout that is not a valid MCP message".
    A line that is not JSON is `stdout-pollution` on a server's stdout and `not-json` on a client's.
    A line that is not a message keeps its bytes, a CR included; a message's `raw` has no CR.

    Args:
        direction: C2S for the client's lines (the server's stdin), S2C for the server's stdout.
        max_line: the longest line read (`framing.MAX_LINE_BYTES`); a longer one is `line-too-long`.
    """

    __slots__ = ("_framer", "_not_json")

    def __init__(self, direction: Direction, *, max_line: int = MAX_LINE_BYTES) -> None:
        super().__init__(direction)
        self._framer = LineFramer(max_line, keep_cr=True)
        self._not_json = "stdout-pollution" if direction is S2C else "not-json"

    def receive_data(self, data: bytes) -> None:
        """Buffer `data`; `b""` marks the end of the stream."""
        self._framer.receive_data(data)  # the framer keeps the end: `next_event` asks it

    def next_event(self) -> ObserverEvent | Signal:
        if not self._queue:
            item = self._framer.next_event()
            if type(item) is Signal:
                return item
            self._line(item.data if type(item) is Line and item.terminated else item, self._queue)
        return self._queue.popleft()

    def feed(self, data: bytes) -> list[ObserverEvent]:
        """Receive `data` (`b""`: the end) and return every event it completes.

        The tee's recorder calls this for every chunk: a line that is a message costs a JSON parse,
        its classification and one `Observed`, nothing more.
        """
        events: list[ObserverEvent] = []
        if self._queue:  # left by `next_event` calls
            events += self._queue
            self._queue.clear()
        # Bound once per chunk, not per line: this loop runs ~100,000 times a second in the tee's
        # recorder (one name per statement: a tuple assignment builds and unpacks a tuple).
        loads = orjson.loads
        from_obj = jsonrpc.from_obj
        append = events.append
        for item in self._framer.lines(data):
            if type(item) is bytes:
                try:
                    message = from_obj(loads(item))
                except (orjson.JSONDecodeError, jsonrpc.InvalidMessage):
                    pass  # the odd line's path says why
                else:
                    # Built without the dataclass constructor, one store per field: ~40 % cheaper.
                    event = _new(Observed)
                    event.message = message
                    event.raw = item[:-1] if item[-1:] == b"\r" else item
                    event.sse = None
                    append(event)
                    continue
            self._line(item, events)
        return events

    def _line(self, item: bytes | Line | LineTooLong, out) -> None:
        """The events of one line: `item` is a whole line's bytes, a line cut off by the end, or one too long."""
        direction = self.direction
        if type(item) is LineTooLong:
            out.append(Violation("line-too-long", f"a line of {item.size} bytes", direction, item.head))
            return
        data = item if type(item) is bytes else item.data
        event = _decoded(data, direction, self._not_json)
        if type(event) is Observed:
            event.raw = data.removesuffix(b"\r")
        out.append(event)
        if type(item) is Line and not item.terminated:  # junk or not, a last line without its newline is torn
            out.append(Violation("unterminated-line", "the stream ended inside a line", direction))


# --- HTTP bodies -----------------------------------------------------------------------------


class BodyObserver(_Queued):
    """Reads one HTTP body, whole or in chunks: the message it holds, or why it holds none.

    Args:
        direction: C2S for a request's body, S2C for an answer's.
        content_type: the body's `Content-Type`, if any.
        required: the body must hold a message (an MCP POST): an empty body is `empty-body` and
            one that is not JSON is `not-json`. Otherwise (an answer) an empty body holds none (a
            202), one whose content type says JSON must be JSON (`not-json` names the type), one
            that only starts like JSON is a message if it decodes as one, and any other body
            holds no message and is no violation (an HTML error page, say).
        label: what the body belongs to, for the `empty-body` detail (`POST /mcp`).
    """

    __slots__ = ("content_type", "required", "label", "_body")

    def __init__(self, direction: Direction, content_type: str | None = None, *, required: bool = False, label: str = "a request") -> None:
        super().__init__(direction)
        self.content_type = content_type
        self.required = required
        self.label = label
        self._body = bytearray()

    def receive_data(self, data: bytes) -> None:
        """Buffer `data`; `b""` marks the end of the body, which is read then."""
        if data:
            if not self._eof:
                self._body += data
            return
        if self._eof:
            return
        self._eof = True
        body, self._body = bytes(self._body), bytearray()
        if event := self._read(body):
            self._queue.append(event)

    def _read(self, body: bytes) -> Observed | Violation | None:
        direction = self.direction
        if self.required:
            if not body:
                return Violation("empty-body", f"{self.label} without a body", direction)
            return _decoded(body, direction, "not-json")
        declared = is_json(self.content_type)
        if not body or not (declared or looks_json(body)):
            return None
        event = _decoded(body, direction, "not-json")
        if type(event) is Violation and event.code == "not-json":
            # Only a body that says it is JSON must be: one that merely starts with `{` may be anything.
            return Violation("not-json", f"{self.content_type} body: {event.detail}", direction, body) if declared else None
        return event


def read_body(body: bytes, direction: Direction, content_type: str | None = None, *, required: bool = False, label: str = "a request") -> list[ObserverEvent]:
    """The events of a whole body: at most one `Observed` or one `Violation` (see `BodyObserver`)."""
    observer = BodyObserver(direction, content_type, required=required, label=label)
    observer.receive_data(body)
    return observer.feed(b"")


# --- SSE streams -----------------------------------------------------------------------------


class SseObserver(_Queued):
    """Reads one SSE stream: the messages its events carry, its other events and comments, the endpoint.

    An event of type `message` (or none) with data carries one JSON-RPC message (Streamable HTTP
    and HTTP+SSE alike); data that is not one is `not-json` or `invalid-message`. An `endpoint`
    event with data is the legacy stream's `EndpointEvent`. An event cut off by the stream's end is
    `sse-truncated`; a line past `sse.MAX_LINE_BYTES` is `sse-line-too-long`, and the stream is
    read no further.

    Args:
        direction: S2C (in MCP only servers send SSE); the violations' direction.
        content_encoding: the stream's `Content-Encoding`, undone before parsing (gzip, deflate,
            br). One this Python cannot decode is `sse-undecodable` at once, before any data, and
            the stream is not read; bytes that fail to decode are `sse-undecodable` too, and what
            comes after them is not read (an event they left unfinished is reported at the end).
    """

    __slots__ = ("events", "_parser", "_decode", "_stopped")

    def __init__(self, direction: Direction = S2C, *, content_encoding: str | None = None) -> None:
        super().__init__(direction)
        self.events = 0  # SSE events read, of any type
        self._parser = SseParser()
        self._decode = stream_decoder(content_encoding) if content_encoding else None
        self._stopped = False  # the stream is read no further
        if content_encoding and self._decode is None:
            self._stop("sse-undecodable", f"an event stream with Content-Encoding {content_encoding}, which this recorder cannot decode")

    @property
    def last_event_id(self) -> str:
        """The id of the last event that set one (`""` before any): where `Last-Event-ID` resumes."""
        return self._parser.last_event_id

    def receive_data(self, data: bytes) -> None:
        """Parse `data`; `b""` marks the end of the stream (an event left unfinished is reported then)."""
        if not data:
            self._eof = True
        if self._stopped:
            return
        if self._decode is not None:
            try:
                decoded = self._decode(data)  # b"" drains the decoder
            except Exception as exc:  # noqa: BLE001 - zlib.error, brotli.error: the codecs share no base class
                # What was parsed stays: an event it left unfinished is still reported at the end.
                self._queue.append(Violation("sse-undecodable", f"the compressed event stream failed to decode: {exc}", self.direction))
                self._decode = _undecodable
                decoded = b""
            if decoded:
                self._parse(decoded)
            if data:
                return
        self._parse(data)

    def broken(self) -> list[ObserverEvent]:
        """The stream broke (a reset, the proxy's error) before its end: the events still to hand
        out, and what the break cut short (`sse-truncated`: the bytes of an unfinished event).
        The stream is read no further."""
        if not self._stopped:
            self._stopped = True
            self._eof = True
            self._convert(self._parser.feed(b""), "the stream broke inside an SSE event")
        return self.feed(b"")

    def _parse(self, data: bytes) -> None:
        try:
            items = self._parser.feed(data)
        except RemoteProtocolError as exc:
            self._stop("sse-line-too-long", str(exc))
            return
        if items:
            self._convert(items, "the stream ended inside an SSE event")

    def _convert(self, items: list, truncated: str) -> None:
        direction, append = self.direction, self._queue.append
        for item in items:
            if type(item) is SseEvent:
                self.events += 1
                kind, data = item.event, item.data
                if data and (kind is None or kind == "message"):
                    append(_decoded(data.encode(), direction, "not-json", item))
                elif data and kind == "endpoint":
                    append(EndpointEvent(data=data, sse=item))
                else:
                    append(item)
            elif type(item) is SseTruncated:
                append(Violation("sse-truncated", truncated, direction, item.pending))
            else:
                append(item)

    def _stop(self, code: str, detail: str) -> None:
        """Read no further: say why (nothing the stream sends from here on is parsed, its end included)."""
        self._stopped = True
        self._queue.append(Violation(code, detail, self.direction))
