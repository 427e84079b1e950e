"""Server-Sent Events: an incremental parser and an encoder, free of I/O.

Every HTTP part of mcpbench (recorder, replayer, load users, mock servers)
reads and writes SSE through this module. It follows the WHATWG rules:
https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation

Unlike a browser's EventSource, the parser also reports what a person
debugging a stream needs: comments (`: ping` keep-alives), blocks that set only
`id:` or `retry:`, and an event cut off by the end of the stream.

    parser = SseParser()
    parser.receive_data(chunk)          # b"" means EOF
    while (event := parser.next_event()) is not NEED_DATA: ...
"""

from collections import deque
from dataclasses import dataclass

from mcpbench.protocol.errors import LocalProtocolError, RemoteProtocolError
from mcpbench.protocol.framing import EOF, NEED_DATA, Signal

# WHATWG: "the stream must then be decoded as UTF-8"; a leading BOM is skipped.
_BOM = b"\xef\xbb\xbf"

# One SSE line (in practice one JSON-RPC message in a `data:` field) is held in
# memory until it ends. MCP answers reach many MiB; 256 MiB bounds a stream that
# never sends a line ending.
MAX_LINE_BYTES = 256 * 1024 * 1024


@dataclass(slots=True, kw_only=True)  # one per event on every reader's hot path: not frozen (frozen costs 3x to build)
class SseEvent:
    """One block of fields ended by a blank line.

    `data` is None when the block had no `data:` field (a browser would not
    dispatch it: a bare `id:` or `retry:`). `event` is None when no `event:`
    field was given (a browser calls that a "message"). `id` and `retry` are the
    values set in this block, if any.
    """

    data: str | None = None
    event: str | None = None
    id: str | None = None
    retry: int | None = None

    @property
    def type(self) -> str:
        """The event type a browser would dispatch."""
        return self.event or "message"


@dataclass(frozen=True, slots=True)
class SseComment:
    """A line starting with `:`, such as the SDKs' `: ping - <time>` keep-alive."""

    text: str


@dataclass(frozen=True, slots=True)
class SseTruncated:
    """The stream ended inside an event; `pending` holds the unfinished bytes."""

    pending: bytes


class SseParser:
    """Turns a byte stream into `SseEvent`, `SseComment` and `SseTruncated` events."""

    def __init__(self) -> None:
        self.last_event_id = ""  # WHATWG "last event ID buffer": what Last-Event-ID resumes from
        self.retry_ms: int | None = None  # the stream's reconnection time, once set
        self._partial = bytearray()  # an unfinished line
        self._skip_lf = False  # the last chunk ended in CR: a leading LF belongs to it
        self._started = False
        self._eof = False
        self._events: deque = deque()
        self._fields: list[bytes] = []  # raw lines of the current block, for SseTruncated
        self._data: list[bytes] = []
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None

    def receive_data(self, data: bytes) -> None:
        """Parse `data`; `b""` marks the end of the stream.

        Raises:
            RemoteProtocolError: a line grew past `MAX_LINE_BYTES`.
        """
        if not data:
            if not self._eof:
                self._eof = True
                if self._partial or self._fields:
                    tail = [bytes(self._partial)] if self._partial else []
                    self._events.append(SseTruncated(b"\n".join(self._fields + tail)))
                    self._partial.clear()
                    self._fields.clear()
            return
        if not self._started:
            if not self._partial and data[:1] != _BOM[:1]:
                self._started = True  # the usual start: no BOM, nothing held back, nothing to copy
            else:
                # The BOM may itself arrive split; wait until we can tell.
                self._partial += data
                if len(self._partial) < len(_BOM) and _BOM.startswith(bytes(self._partial)):
                    return
                data = bytes(self._partial)
                self._partial.clear()
                self._started = True
                if data.startswith(_BOM):
                    data = data[len(_BOM) :]
        if self._skip_lf:
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
        if b"\n" not in data and b"\r" not in data:
            self._partial += data
            if len(self._partial) > MAX_LINE_BYTES:
                raise RemoteProtocolError(f"SSE line longer than {MAX_LINE_BYTES} bytes")
            return
        lines = data.splitlines(keepends=True)
        if self._partial:
            self._partial += lines[0]
            lines[0] = bytes(self._partial)
            self._partial.clear()
        last = lines[-1]
        if not last.endswith((b"\n", b"\r")):
            self._partial += lines.pop()
        elif last.endswith(b"\r"):
            self._skip_lf = True  # CR ends the line; if LF follows, it is CRLF
        fields, data_lines = self._fields, self._data
        for line in lines:
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
            if line[:5] == b"data:" and line[5:6] != b"":  # the common field, inline: no call per line
                fields.append(line)
                data_lines.append(line[6:] if line[5] == 32 else line[5:])
            else:
                self._line(line)

    def next_event(self) -> SseEvent | SseComment | SseTruncated | Signal:
        """The next parsed event, `NEED_DATA`, or `EOF` once the stream has ended."""
        if self._events:
            return self._events.popleft()
        return EOF if self._eof else NEED_DATA

    def feed(self, data: bytes) -> list[SseEvent | SseComment | SseTruncated]:
        """Receive `data` and return every event it completes."""
        self.receive_data(data)
        events = self._events
        if not events:
            return []
        self._events = deque()
        return list(events)

    def _line(self, line: bytes) -> None:
        if not line:
            self._dispatch()
            return
        if line[0] == 58:  # ":" starts a comment
            text = line[1:]
            self._events.append(SseComment((text[1:] if text[:1] == b" " else text).decode("utf-8", "replace")))
            return
        self._fields.append(line)
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" not in value:  # WHATWG: an id with NUL is ignored
                self._id = self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value.isdigit():  # WHATWG: ASCII digits only, else ignored
                self._retry = self.retry_ms = int(value)
        # Any other field name is ignored, as WHATWG says.

    def _dispatch(self) -> None:
        if not self._fields:
            return  # blank lines between events
        lines = self._data
        data = (lines[0] if len(lines) == 1 else b"\n".join(lines)).decode("utf-8", "replace") if lines else None
        self._events.append(SseEvent(data=data, event=self._event, id=self._id, retry=self._retry))
        self._fields.clear()
        self._data.clear()
        self._event = self._id = self._retry = None


def encode(event: SseEvent | SseComment, *, eol: bytes = b"\n") -> bytes:
    """The bytes of one event (ending in a blank line) or one comment line.

    Multi-line data becomes one `data:` line per line.

    Raises:
        LocalProtocolError: an `event` or `id` containing a line break (or an id with NUL).
    """
    if isinstance(event, SseComment):
        if "\n" in event.text or "\r" in event.text:
            raise LocalProtocolError("an SSE comment cannot contain a line break")
        return b":" + (b" " + event.text.encode() if event.text else b"") + eol
    out = []
    if event.event is not None:
        if "\n" in event.event or "\r" in event.event:
            raise LocalProtocolError("an SSE event type cannot contain a line break")
        out.append(b"event: " + event.event.encode() + eol)
    if event.id is not None:
        if "\n" in event.id or "\r" in event.id or "\0" in event.id:
            raise LocalProtocolError("an SSE id cannot contain a line break or NUL")
        out.append(b"id: " + event.id.encode() + eol)
    if event.retry is not None:
        out.append(b"retry: " + str(int(event.retry)).encode() + eol)
    if event.data is not None:
        for line in event.data.encode().replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"):
            out.append(b"data: " + line + eol if line else b"data:" + eol)
    if not out:
        raise LocalProtocolError("an SSE event needs at least one field")
    return b"".join(out) + eol
