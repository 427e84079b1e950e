"""SSE answers as the recording addon reads them: the tap on each event-stream answer.

A `text/event-stream` response is streamed from `responseheaders` on (mitmproxy buffers bodies by
default, which holds back a legacy `/sse` stream entirely). mitmproxy hands its `SseTap` each chunk
before it forwards it; the tap has the addon record what the chunk completes (read with the protocol
core's `SseObserver`: a compressed stream is decoded first, a chunk may end anywhere) and written to
the trace with one `os.write`, then returns the chunk unchanged for mitmproxy to send on. So an
event is in the trace before the client can have it, as docs/trace-format.md promises: a recorder
killed with its whole process tree right after the client read an answer has the answer on file.
Recording a chunk adds its cost to the chunk's way to the client (the parse, the encoding, the
write: 13 µs p50, 34 µs p99 for a one-event progress chunk, measured on the 2-core machine at load
6), which is what reading an event once it went out saved. A recorder failure
while recording a stream is logged once and the stream passes on unrecorded.
"""

import logging
from collections.abc import Callable

from mcpbench.protocol.observer import ObserverEvent, SseObserver
from mcpbench.protocol.session import S2C
from mcpbench.record.exchange import HttpExchange
from mcpbench.trace.format import now

logger = logging.getLogger(__name__)


class SseTap:
    """The stream callable of one SSE answer, and the protocol core's observer of its bytes.

    mitmproxy calls it with each chunk, then `b""` at the end, and sends on what it returns: the
    chunk, unchanged, once `record` has written what it completes.

    Args:
        record: the addon's recorder of one chunk: `record(tap, chunk, ts)` reads it (`read`) and
            writes its events.
        exchange: the exchange whose answer this is.
        request: its mitmproxy request (a legacy endpoint URI is relative to its URL).
        encoding: the answer's `Content-Encoding`, undone by the observer before it parses.
    """

    __slots__ = ("record", "exchange", "request", "observer", "compressed", "size", "started", "closed")

    def __init__(self, record: Callable[["SseTap", bytes, float], None], exchange: HttpExchange, request, encoding: str | None = None) -> None:
        self.record = record
        self.exchange = exchange
        self.request = request
        self.observer = SseObserver(S2C, content_encoding=encoding)
        self.compressed = bool(encoding)
        self.size = 0  # bytes on the wire
        self.started = False  # mitmproxy has called it
        self.closed = False  # read no further (ended, broken, or unreadable)

    def __call__(self, chunk: bytes) -> bytes:
        if not self.closed:
            try:
                self.record(self, chunk, now())
            except Exception:  # never break the observed stream
                self.closed = True
                logger.exception("mcpbench: recording an SSE stream failed; it passes on unrecorded")
        return chunk

    def read(self, chunk: bytes) -> list[ObserverEvent]:
        """What `chunk` (b"": the stream's end) completes, as the observer reads it."""
        self.started = True
        self.size += len(chunk)
        return self.observer.feed(chunk)

    def broken(self) -> list[ObserverEvent]:
        """The stream broke: the event it cut short (`sse-truncated`), if any. The tap reads no further.

        A compressed stream's is not reported: the recorder never has (its trace bytes stay as they were).
        """
        self.closed = True
        return [] if self.compressed else self.observer.broken()
