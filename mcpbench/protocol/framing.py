"""Newline framing for the stdio transport, incremental and free of I/O.

MCP stdio (every version): "Messages are delimited by newlines, and MUST NOT
contain embedded newlines." A recorder must also survive what real servers do
anyway: CRLF endings, partial reads, huge lines and bytes that are not UTF-8.
The framer therefore works on bytes and never decodes.

    framer = LineFramer()
    framer.receive_data(chunk)          # b"" means EOF
    while (event := framer.next_event()) is not NEED_DATA: ...
"""

import enum
from dataclasses import dataclass


class Signal(enum.Enum):
    """What `next_event()` returns when it has no event to give."""

    NEED_DATA = "need data"
    EOF = "eof"


NEED_DATA = Signal.NEED_DATA
EOF = Signal.EOF

# A recorder keeps a whole line in memory to parse it. 256 MiB is far above any
# real MCP message (tests send 16 MiB) yet bounds memory when a peer streams
# bytes that never end in a newline; past it the line is reported, not kept.
MAX_LINE_BYTES = 256 * 1024 * 1024

# How much of an over-long line is kept for the report.
OVERFLOW_HEAD_BYTES = 1024


@dataclass(slots=True)  # not frozen: one is made per line on the tee's hot path (see jsonrpc.Message)
class Line:
    """One line without its ending (LF or CRLF). `terminated` is False only for
    bytes left at EOF with no newline after them."""

    data: bytes
    terminated: bool = True


@dataclass(frozen=True, slots=True)
class LineTooLong:
    """A line longer than the framer's limit: its size and first bytes."""

    size: int
    head: bytes
    terminated: bool = True


class LineFramer:
    """Splits a byte stream into lines, whatever the chunking.

    `keep_cr` keeps the CR of a CRLF ending in the line: a recorder keeps the bytes of a line that
    is not a message exactly as sent (JSON ignores the CR as whitespace).
    """

    def __init__(self, max_line: int = MAX_LINE_BYTES, *, keep_cr: bool = False) -> None:
        self.max_line = max_line
        self.keep_cr = keep_cr
        self._buf = bytearray()
        self._scanned = 0  # bytes at the front of _buf known to hold no LF
        self._dropped = 0  # bytes of an over-long line already thrown away
        self._head = b""
        self._eof = False
        self._done = False

    def receive_data(self, data: bytes) -> None:
        """Buffer `data`; `b""` marks the end of the stream."""
        if not data:
            self._eof = True
        else:
            self._buf += data

    def next_event(self) -> Line | LineTooLong | Signal:
        """The next complete line, `NEED_DATA`, or `EOF` once the stream has ended."""
        buf = self._buf
        end = buf.find(b"\n", self._scanned)
        if end >= 0:
            self._scanned = 0
            if self._dropped or end > self.max_line:  # one that came whole is reported as one that came in pieces
                return self._overflow(end, terminated=True)
            line = bytes(buf[: end - 1 if end and buf[end - 1] == 13 and not self.keep_cr else end])
            del buf[: end + 1]
            return Line(line)
        self._scanned = len(buf)
        if self._dropped or len(buf) > self.max_line:
            # Keep memory bounded: remember the head, count and drop the rest.
            self._keep_head(len(buf))
            self._dropped += len(buf)
            buf.clear()
            self._scanned = 0
        if not self._eof:
            return NEED_DATA
        if self._dropped:
            return self._overflow(len(buf), terminated=False)
        if buf:
            line = bytes(buf)
            buf.clear()
            return Line(line, terminated=False)
        return EOF

    def feed(self, data: bytes) -> list[Line | LineTooLong]:
        """Receive `data` and return every event it completes."""
        return [Line(item) if type(item) is bytes else item for item in self.lines(data)]

    def lines(self, data: bytes) -> list[bytes | Line | LineTooLong]:
        """Like `feed`, but a complete line comes as its bytes, not wrapped in a `Line`.

        The tee's recorder calls this on every chunk: one object less per line
        is a tenth of what it spends on a small message. Only the rare events
        (a line cut off by EOF, a line over the limit) come as objects.
        """
        if data and not self._dropped and len(data) <= self.max_line:
            # Fast path: split once. A line begun in an earlier chunk is finished first.
            first: list[bytes] = []
            if self._buf:
                end = data.find(b"\n")
                if end < 0 or len(self._buf) + end > self.max_line:
                    return self._slow_lines(data)
                self._buf += data[:end]
                first = [bytes(self._buf[:-1] if self._buf[-1:] == b"\r" and not self.keep_cr else self._buf)]
                self._buf.clear()
                self._scanned = 0
                data = data[end + 1 :]
            if data[-1:] == b"\n":  # the usual chunk ends with its last line: nothing to hold back
                lines = data.split(b"\n")
                del lines[-1]
            else:
                *lines, rest = data.split(b"\n")
                self._buf += rest
            if not self.keep_cr and data.find(b"\r") >= 0:
                lines = [line[:-1] if line[-1:] == b"\r" else line for line in lines]
            return first + lines if first else lines
        return self._slow_lines(data)

    def _slow_lines(self, data: bytes) -> list[bytes | Line | LineTooLong]:
        self.receive_data(data)
        events: list[bytes | Line | LineTooLong] = []
        while not isinstance(event := self.next_event(), Signal):
            events.append(event.data if type(event) is Line and event.terminated else event)
        return events

    def _keep_head(self, end: int) -> None:
        """Add the buffer's first bytes (of its first `end`) to the over-long line's head, up to
        `OVERFLOW_HEAD_BYTES`: the head is the line's first bytes however it was cut."""
        if (room := OVERFLOW_HEAD_BYTES - len(self._head)) > 0:
            self._head += bytes(self._buf[: min(end, room)])

    def _overflow(self, end: int, *, terminated: bool) -> LineTooLong:
        self._keep_head(end)
        event = LineTooLong(size=self._dropped + end, head=self._head, terminated=terminated)
        del self._buf[: end + 1]
        self._dropped, self._head = 0, b""
        return event

    @property
    def buffered(self) -> int:
        """Bytes of an unfinished line held right now."""
        return len(self._buf)
