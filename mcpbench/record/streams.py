"""SSE stream handling of the recording addon: the tap on an event-stream answer, and its chunks
parsed and recorded as they pass.

A `text/event-stream` response is streamed from `responseheaders` on (mitmproxy buffers bodies by
default, which holds back a legacy `/sse` stream entirely). Its `StreamTap` returns each chunk
unchanged and, once mitmproxy has forwarded it (later in the same event-loop turn), the chunk is
parsed with the protocol core's incremental `SseParser` (a chunk may end anywhere; a compressed
stream is decoded first) and what it completes is recorded, so recording adds nothing to an
event's way to the client. A recorder failure while recording a stream is logged once and the
stream passes on unrecorded.
"""

import asyncio
import logging
from collections import deque

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.errors import RemoteProtocolError
from mcpbench.protocol.http import is_event_stream, resolve_endpoint, stream_decoder
from mcpbench.protocol.session import S2C
from mcpbench.protocol.sse import SseComment, SseEvent, SseTruncated
from mcpbench.record.exchange import LEGACY, StreamTap, json_text
from mcpbench.protocol.http import legacy_session_key
from mcpbench.trace.format import Kind, now

logger = logging.getLogger(__name__)


class SseStreams:
    """The SSE part of `Recording` (a mixin: it uses the recording's exchanges, sessions and output).

    SSE chunks are recorded just after mitmproxy has forwarded them (`defer_chunk`); every other
    entry point of the recording first records the chunks still queued (`settle`), so the trace
    keeps the order in which things happened.
    """

    def __init__(self) -> None:
        super().__init__()
        self._chunks: deque[tuple[StreamTap, bytes, float]] = deque()  # SSE chunks forwarded, not yet recorded
        self._settle_pending = False

    def defer_chunk(self, tap: StreamTap, chunk: bytes) -> None:
        """Record `chunk` of `tap`'s stream once mitmproxy has forwarded it (later in this loop turn).

        Outside a running loop (tests driving the hooks directly) it is recorded at once, and so is
        the stream's end (b""): mitmproxy calls the `response` hook next and sends the answer's end
        only after it, so recording it now delays nothing and saves a turn of the loop.
        """
        self._chunks.append((tap, chunk, now()))
        if not chunk:
            self.settle()
            return
        if self._settle_pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.settle()
            return
        self._settle_pending = True
        loop.call_soon(self.settle)

    def settle(self) -> None:
        """Record the queued SSE chunks, in order. A recorder failure closes that tap only."""
        self._settle_pending = False
        chunks = self._chunks
        while chunks:
            tap, chunk, ts = chunks.popleft()
            if tap.closed:
                continue
            try:
                self.stream_data(tap, chunk, ts)
            except Exception:  # never break the observed stream
                tap.closed = True
                logger.exception("mcpbench: recording an SSE stream failed; it passes on unrecorded")

    def response_headers(self, flow) -> None:
        """Install the SSE tap on an event-stream response (before its body flows, or it is buffered)."""
        self.settle()
        ex = self.exchanges.get(flow.id)
        if ex is None:
            return
        response = flow.response
        headers = self._resp_headers(ex, response)
        if not is_event_stream(ex.resp_content_type):
            return
        ex.mcp = True
        if ex.method == "GET" and ex.session is None:
            ex.transport = LEGACY  # a stream without Mcp-Session-Id: legacy `GET /sse`
        self.resolve(ex, flow)
        encoding = headers.get("content-encoding")
        decode = stream_decoder(encoding) if encoding else None
        tap = StreamTap(self, ex, flow.request, decode)
        ex.tap = tap
        response.stream = tap
        # Not flushed here: the first chunk (or any other exchange) writes it moments later.
        self._lines.append(self.writer.encode_flow_stream(
            now(), ex.flow_id, ex.session, ex.transport, "open", ex.conn, ex.method, ex.path,
            {"status": ex.resp_status, "content_type": ex.resp_content_type, "headers": headers},
        ))
        if encoding and decode is None:
            tap.closed = True  # passed through untouched, but its events cannot be read
            self._violation(ex, S2C, now(), "sse-undecodable", f"an event stream with Content-Encoding {encoding}, which this recorder cannot decode", None)

    def stream_data(self, tap: StreamTap, chunk: bytes, ts: float) -> None:
        """Parse and record one chunk of an SSE stream that arrived at `ts` (b"": the stream's end)."""
        tap.started = True
        tap.size += len(chunk)
        ex = tap.exchange
        try:
            if tap.decode is None:
                events = tap.parser.feed(chunk)
            else:  # b"" tells the parser the stream ended: only once the decoder is drained
                data = self._decoded(tap, chunk, ts)
                events = tap.parser.feed(data) if data else []
                if not chunk:
                    events += tap.parser.feed(b"")
        except RemoteProtocolError as exc:
            tap.closed = True
            self._violation(ex, S2C, ts, "sse-line-too-long", str(exc), None)
            events = []
        for item in events:
            if type(item) is SseEvent:
                tap.events += 1
                self._sse_event(tap, item, ts)
            elif type(item) is SseComment:
                self._event(ex, Kind.SSE, S2C, ts, comment=item.text)
            elif type(item) is SseTruncated:
                self._violation(ex, S2C, ts, "sse-truncated", "the stream ended inside an SSE event", item.pending)
        if chunk:
            self._flush()
        else:  # the end: the `response` hook follows at once and writes this with the `http` event
            tap.closed = True
            self._lines.append(self.writer.encode_flow_stream(
                ts, ex.flow_id, ex.session, ex.transport, "close", ex.conn, ex.method, ex.path, {"events": tap.events, "bytes": tap.size},
            ))

    def _decoded(self, tap: StreamTap, chunk: bytes, ts: float) -> bytes:
        """A compressed stream's chunk, decoded; a stream that fails to decode is recorded no further."""
        try:
            data = tap.decode(chunk)
        except Exception as exc:  # noqa: BLE001 - zlib.error, brotli.error: the codecs share no base class
            self._violation(tap.exchange, S2C, ts, "sse-undecodable", f"the compressed event stream failed to decode: {exc}", None)
            tap.decode = lambda _chunk: b""
            return b""
        return data

    def _sse_event(self, tap: StreamTap, item: SseEvent, ts: float) -> None:
        ex = tap.exchange
        kind, data = item.event, item.data
        if data and (kind is None or kind == "message"):
            raw = data.encode()
            try:
                message = jsonrpc.decode(raw)
            except jsonrpc.NotJson as exc:
                self._violation(ex, S2C, ts, "not-json", exc.reason, raw)
                return
            except jsonrpc.InvalidMessage as exc:
                self._violation(ex, S2C, ts, "invalid-message", exc.reason, raw)
                return
            sse = {"event": kind} if item.id is None else {"event": kind, "id": item.id}
            self._response_message(ex, json_text(raw), message, ts, sse)
            return
        fields: dict = {"event": kind}
        if item.id is not None:
            fields["id"] = item.id
        if item.retry is not None:
            fields["retry"] = item.retry
        if data is not None:
            fields["data"] = data
        if kind == "endpoint" and data:
            # POSTs go to the endpoint as sent; the trace (its data, and the
            # session key taken from it) gets it with secret query values fingerprinted.
            url = resolve_endpoint(tap.request.url, data)
            redact = self.writer.redactor.url
            fields["data"] = redact(data)
            key = legacy_session_key(fields["data"])
            self.book.add_endpoint(url, key)
            fields["endpoint"] = redact(url)
            fields["conn_session"] = ex.session
            ex.session, ex.transport = key, LEGACY
        self._event(ex, Kind.SSE, S2C, ts, **fields)

    def stream_error(self, flow) -> None:
        self.settle()
        ex = self.exchanges.get(flow.id)
        if ex is None or ex.tap is None or ex.tap.closed:
            return
        tap = ex.tap
        tap.closed = True
        ts = now()
        if tap.decode is None:  # the bytes of an event the break cut short are kept, not lost
            try:
                ends = tap.parser.feed(b"")
            except RemoteProtocolError:
                ends = []
            for item in ends:
                if type(item) is SseTruncated:
                    self._violation(ex, S2C, ts, "sse-truncated", "the stream broke inside an SSE event", item.pending)
        detail = flow.error.msg if flow.error else "stream broken"
        self._event(
            ex, Kind.STREAM, None, now(), event="error", conn=ex.conn, method=ex.method, path=ex.path,
            events=tap.events, bytes=tap.size, error=detail,
        )

