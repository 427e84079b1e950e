"""SSE answers as the recording addon reads them: the tap on each event-stream answer, and the queue
of chunks forwarded but not yet recorded.

A `text/event-stream` response is streamed from `responseheaders` on (mitmproxy buffers bodies by
default, which holds back a legacy `/sse` stream entirely). Its `SseTap` returns each chunk
unchanged and hands it to the `ChunkQueue`; once mitmproxy has forwarded it (later in the same
event-loop turn), the queue gives it back to the addon, which has the tap read it (`SseTap.read`:
a compressed stream is decoded first, a chunk may end anywhere) and records what it completes. So
recording adds nothing to an event's way to the client. A recorder failure while recording a
stream is logged once and the stream passes on unrecorded.
"""

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from mcpbench.protocol.errors import RemoteProtocolError
from mcpbench.protocol.sse import SseComment, SseEvent, SseParser, SseTruncated
from mcpbench.record.exchange import HttpExchange
from mcpbench.trace.format import now

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StreamProblem:
    """Why the tap stops reading a stream (the stream itself passes on): a violation's code and detail."""

    code: str
    detail: str


SseItem = SseEvent | SseComment | SseTruncated | StreamProblem


class SseTap:
    """The stream callable of one SSE answer, and the reader of its bytes.

    mitmproxy calls it with each chunk, then `b""` at the end, and sends on what it returns: the
    chunk, unchanged. The chunk goes to the queue, which hands it back (`read`) once forwarded.
    """

    __slots__ = ("queue", "exchange", "request", "parser", "decode", "events", "size", "started", "closed")

    def __init__(self, queue: "ChunkQueue", exchange: HttpExchange, request, decode: Callable[[bytes], bytes] | None = None) -> None:
        self.queue = queue
        self.exchange = exchange
        self.request = request  # the stream's request: a legacy endpoint URI is relative to its URL
        self.parser = SseParser()
        self.decode = decode  # for a compressed stream: its incremental decoder (`stream_decoder`)
        self.events = 0  # SSE events read (comments not counted)
        self.size = 0  # bytes on the wire
        self.started = False  # mitmproxy has called it
        self.closed = False  # read no further (ended, broken, or unreadable)

    def __call__(self, chunk: bytes) -> bytes:
        if not self.closed:
            self.queue.defer(self, chunk)
        return chunk

    def read(self, chunk: bytes) -> list[SseItem]:
        """What `chunk` (b"": the stream's end) completes: SSE events, comments, a truncated event,
        or a `StreamProblem` after which the tap is closed."""
        self.started = True
        self.size += len(chunk)
        try:
            if self.decode is None:
                items = self.parser.feed(chunk)
            else:  # b"" tells the parser the stream ended: only once the decoder is drained
                items = []
                try:
                    data = self.decode(chunk)
                except Exception as exc:  # noqa: BLE001 - zlib.error, brotli.error: the codecs share no base class
                    self.decode = _nothing  # the rest is passed on, not read
                    items.append(StreamProblem("sse-undecodable", f"the compressed event stream failed to decode: {exc}"))
                    data = b""
                if data:
                    items += self.parser.feed(data)
                if not chunk:
                    items += self.parser.feed(b"")
        except RemoteProtocolError as exc:
            self.closed = True
            return [StreamProblem("sse-line-too-long", str(exc))]
        if not chunk:
            self.closed = True
        return items

    def broken(self) -> list[SseTruncated]:
        """The stream broke: the event it cut short, if any (a compressed stream's is lost)."""
        self.closed = True
        if self.decode is not None:
            return []
        try:
            return [item for item in self.parser.feed(b"") if type(item) is SseTruncated]
        except RemoteProtocolError:
            return []


def _nothing(_chunk: bytes) -> bytes:
    return b""


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
