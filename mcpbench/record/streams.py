"""SSE answers as the recording addon reads them: the tap on each event-stream answer, and the queue
of chunks forwarded but not yet recorded.

A `text/event-stream` response is streamed from `responseheaders` on (mitmproxy buffers bodies by
default, which holds back a legacy `/sse` stream entirely). Its `SseTap` returns each chunk
unchanged and hands it to the `ChunkQueue`; once mitmproxy has forwarded it (later in the same
event-loop turn), the queue gives it back to the addon, which has the tap read it (`SseTap.read`,
with the protocol core's `SseObserver`: a compressed stream is decoded first, a chunk may end
anywhere) and records what it completes. So recording adds nothing to an event's way to the
client. A recorder failure while recording a stream is logged once and the stream passes on
unrecorded.
"""

import asyncio
import logging
from collections import deque
from collections.abc import Callable

from mcpbench.protocol.observer import ObserverEvent, SseObserver
from mcpbench.protocol.session import S2C
from mcpbench.record.exchange import HttpExchange
from mcpbench.trace.format import now

logger = logging.getLogger(__name__)


class SseTap:
    """The stream callable of one SSE answer, and the protocol core's observer of its bytes.

    mitmproxy calls it with each chunk, then `b""` at the end, and sends on what it returns: the
    chunk, unchanged. The chunk goes to the queue, which hands it back (`read`) once forwarded.

    Args:
        queue: where forwarded chunks wait to be read.
        exchange: the exchange whose answer this is.
        request: its mitmproxy request (a legacy endpoint URI is relative to its URL).
        encoding: the answer's `Content-Encoding`, undone by the observer before it parses.
    """

    __slots__ = ("queue", "exchange", "request", "observer", "compressed", "size", "started", "closed")

    def __init__(self, queue: "ChunkQueue", exchange: HttpExchange, request, encoding: str | None = None) -> None:
        self.queue = queue
        self.exchange = exchange
        self.request = request
        self.observer = SseObserver(S2C, content_encoding=encoding)
        self.compressed = bool(encoding)
        self.size = 0  # bytes on the wire
        self.started = False  # mitmproxy has called it
        self.closed = False  # read no further (ended, broken, or unreadable)

    def __call__(self, chunk: bytes) -> bytes:
        if not self.closed:
            self.queue.defer(self, chunk)
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


class ChunkQueue:
    """SSE chunks mitmproxy has forwarded, recorded in order later in the same event-loop turn.

    `record(tap, chunk, ts)` is called for each; every other entry point of the addon first records
    what is still queued (`settle`), so the trace keeps the order in which things happened.
    """

    def __init__(self, record: Callable[[SseTap, bytes, float], None]) -> None:
        self.record = record
        self._chunks: deque[tuple[SseTap, bytes, float]] = deque()
        self._pending = False  # a `settle` is scheduled on the loop

    def __len__(self) -> int:
        return len(self._chunks)

    def defer(self, tap: SseTap, chunk: bytes) -> None:
        """Record `chunk` of `tap`'s stream once mitmproxy has forwarded it (later in this loop turn).

        Outside a running loop (tests driving the hooks directly) it is recorded at once, and so is
        the stream's end (b""): mitmproxy calls the `response` hook next and sends the answer's end
        only after it, so recording it now delays nothing and saves a turn of the loop.
        """
        self._chunks.append((tap, chunk, now()))
        if not chunk:
            self.settle()
            return
        if self._pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.settle()
            return
        self._pending = True
        loop.call_soon(self.settle)

    def settle(self) -> None:
        """Record the queued chunks, in order. A recorder failure closes that tap only."""
        self._pending = False
        chunks = self._chunks
        while chunks:
            tap, chunk, ts = chunks.popleft()
            if tap.closed:
                continue
            try:
                self.record(tap, chunk, ts)
            except Exception:  # never break the observed stream
                tap.closed = True
                logger.exception("mcpbench: recording an SSE stream failed; it passes on unrecorded")
