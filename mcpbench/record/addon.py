"""A mitmproxy addon that records the MCP traffic passing through the proxy as an mcpbench trace.

Load it as any mitmproxy script, in reverse mode or in regular proxy mode (clients then set
HTTP(S)_PROXY and trust mitmproxy's CA for https upstreams)::

    mitmdump --mode reverse:http://127.0.0.1:8000 -s "$(mcpbench addon-path)" --set mcpbench_out=t.jsonl

`mcpbench record` runs the same addons in-process. The trace has the format of the stdio tee's
(docs/trace-format.md, HTTP kinds in docs/trace-format-http.md): one `message` event per JSON-RPC
message with its HTTP context, one `http` event per HTTP exchange, `stream` events when an SSE stream
opens, ends or breaks, `sse` events for SSE comments and events that carry no message, and
`violation` and `error` events.

The observed session never breaks:

- A `text/event-stream` response is streamed from `responseheaders` on (mitmproxy buffers bodies by
  default, which holds back a legacy `/sse` stream entirely). Its `StreamTap` returns each chunk unchanged
  and, once mitmproxy has forwarded it (later in the same event-loop turn), parses it with the
  protocol core's incremental `SseParser` (a chunk may end anywhere) and records what it completes,
  so recording adds nothing to an event's way to the client. A recorder failure while recording a
  stream is logged once and the stream passes on unrecorded.
- Bodies that are not JSON, broken SSE, disconnects and upstream errors pass through as they are and
  are recorded as `violation`, `stream` or `error` events. Requests that are not MCP pass untouched
  and are recorded as `http` events only.
- Secrets are redacted by the trace writer's `Redactor` (Authorization and cookies by default).

Session keys (the `session` field) and the per-session state live in `sessions.py`.

Everything here runs on mitmproxy's event loop, one hook at a time, on the proxy's hot path: per
request the work is one JSON decode, one session step and a few `os.write`s.
"""

import asyncio
import logging
import sys
from collections import deque
from collections.abc import Sequence

from mitmproxy import ctx, exceptions
from mitmproxy import version as mitmproxy_version
from mitmproxy.flow import Error

from mcpbench.protocol import jsonrpc
from mcpbench.protocol.errors import RemoteProtocolError, TraceError, TraceWriteError
from mcpbench.protocol.http import (
    METHOD,
    PROTOCOL_VERSION,
    SESSION_ID,
    is_event_stream,
    is_json,
    method_header_problems,
    resolve_endpoint,
    stream_decoder,
)
from mcpbench.protocol.session import C2S, S2C, Direction, Violation
from mcpbench.protocol.sse import SseComment, SseEvent, SseTruncated
from mcpbench.protocol.versions import meta_version
from mcpbench.record.exchange import (
    LEGACY,
    STREAMABLE,
    Exchange,
    StreamTap,
    body_fields,
    json_text,
    looks_json,
    url_of,
)
from mcpbench.record.sessions import SessionBook, conn_key, legacy_session_key
from mcpbench.record.timeout import TIMED_OUT, UpstreamTimeout
from mcpbench.trace.format import Kind, now
from mcpbench.trace.redact import Redactor
from mcpbench.trace.writer import TraceWriter, default_trace_path

logger = logging.getLogger(__name__)

# Distinct header blocks whose redacted form is kept: a few per client and server, times the
# sessions of a load test; the cache is simply emptied when full.
HEADER_CACHE_SIZE = 1024
# Distinct header fields whose redacted form is kept: each block's fields, plus the values that
# change per exchange (Date, Content-Length); emptied when full.
FIELD_CACHE_SIZE = 4096

# mitmdump's exit status when the trace cannot be created (unusable --set mcpbench_out).
EXIT_INPUT = 2

# The label of a trace file written to the default folder (no `mcpbench_out`).
DEFAULT_LABEL = "http"

# What mitmproxy logs (at INFO, on this logger) for every answer streamed, and the addon streams
# every SSE answer: a line per answer, which costs more CPU than recording the answer (it goes to
# every log handler and, as an `add_log` event, to every addon). `_QuietStreaming` drops it.
MITMPROXY_SERVER_LOGGER = "mitmproxy.proxy.server"
STREAMING_LOG = "Streaming response from "


class _QuietStreaming(logging.Filter):
    """Drops mitmproxy's per-answer "Streaming response from <host>." line while the addon runs."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.msg
        return not (type(message) is str and message.startswith(STREAMING_LOG))


_QUIET_STREAMING = _QuietStreaming()


class Recording:
    """The state shared by the addon classes: the trace writer, sessions, open exchanges.

    Not an addon itself: `McpRecorder` calls into it. Every entry point collects its events and
    writes them with one `os.write` (`_flush`) before it returns: a request is in the file before
    mitmproxy sends it on. SSE chunks are recorded just after mitmproxy has forwarded them
    (`defer_chunk`), later in the same turn of the event loop; every other entry point first
    records the chunks still queued (`settle`), so the trace keeps the order in which things happened.
    """

    def __init__(self) -> None:
        self.writer: TraceWriter | None = None
        self.settings: tuple | None = None
        self.book = SessionBook()
        self.exchanges: dict[str, Exchange] = {}  # open exchanges by flow id
        self.events_written = 0  # the count of the last writer closed
        self.failed: str | None = None  # why the last writer stopped recording (said on stderr), or None
        self.open_error: TraceError | None = None  # why the trace could not be created
        self._lines: list[bytes] = []
        self._chunks: deque[tuple[StreamTap, bytes, float]] = deque()  # SSE chunks forwarded, not yet recorded
        self._settle_pending = False
        self._header_cache: dict[tuple, dict[str, str]] = {}
        self._field_cache: dict[tuple[bytes, bytes], tuple[str, str]] = {}

    # ---- the trace file -------------------------------------------------------------------------

    def open(self, out: str, redact: Sequence[str], header: dict) -> None:
        """Start writing to `out` (the default folder when empty); a no-op when nothing changed.

        Raises:
            TraceError: the file cannot be created.
        """
        settings = (out, tuple(redact))
        if settings == self.settings and self.writer is not None:
            return
        path = out or default_trace_path(DEFAULT_LABEL)
        redactor = Redactor(redact)
        if isinstance(header.get("upstream"), str):
            header = header | {"upstream": redactor.url(header["upstream"])}
        elif isinstance(header.get("upstream"), list):
            header = header | {"upstream": [redactor.url(url) for url in header["upstream"]]}
        if isinstance(header.get("mode"), list):  # `upstream:http://user:password@proxy:8080`
            header = header | {"mode": [redactor.url(mode) for mode in header["mode"]]}
        writer = TraceWriter(path, transport=STREAMABLE, header=header, redactor=redactor)
        self.close_writer()
        self.writer, self.settings = writer, settings
        self._header_cache.clear()
        self._field_cache.clear()
        logger.info(f"mcpbench: recording MCP traffic to {writer.path}")

    def close_writer(self) -> None:
        self.settle()
        if self.writer is not None:
            self._write_now()
            self.events_written = self.writer.events
            self.writer.close()
            self.failed = self.writer.failed
            self.writer = None

    def _flush(self) -> None:
        """Write the collected events now, with one `os.write`.

        At once rather than at the end of the loop's turn: a `call_soon` round per hook cost more
        CPU than the few writes it saved by coalescing, and nothing waits in memory.
        """
        if self._lines:
            self._write_now()

    def defer_chunk(self, tap: StreamTap, chunk: bytes) -> None:
        """Record `chunk` of `tap`'s stream once mitmproxy has forwarded it (later in this loop turn).

        Outside a running loop (tests driving the hooks directly) it is recorded at once.
        """
        self._chunks.append((tap, chunk, now()))
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

    def _write_now(self) -> None:
        if self._lines and self.writer is not None:
            lines, self._lines = self._lines, []
            self.writer.write_lines(lines)

    def _headers(self, headers) -> dict[str, str]:
        """A mitmproxy `Headers` as a redacted dict with lower-case names, cached by its raw fields.

        Clients and servers repeat the same header blocks; the cache skips decoding and redacting
        them again. The dicts are shared: nothing may change them. A block seen for the first time
        (its Date or Content-Length changed, most often) is made from the fields' own cache.
        """
        fields = headers.fields
        cached = self._header_cache.get(fields)
        if cached is None:
            if len(self._header_cache) >= HEADER_CACHE_SIZE:
                self._header_cache.clear()
            cached = self._header_cache[fields] = self._header_block(fields)
        return cached

    def _header_block(self, fields: tuple[tuple[bytes, bytes], ...]) -> dict[str, str]:
        """`Redactor.header_pairs` of the raw fields, each field redacted once (cached per field)."""
        cache = self._field_cache
        if len(cache) >= FIELD_CACHE_SIZE:
            cache.clear()
        out: dict[str, str] = {}
        for field in fields:
            pair = cache.get(field)
            if pair is None:
                name, value = field
                pair = cache[field] = self.writer.redactor.header(
                    name.decode("utf-8", "surrogateescape"), value.decode("utf-8", "surrogateescape")
                )
            name, value = pair
            out[name] = f"{out[name]}, {value}" if name in out else value
        return out

    # ---- requests -------------------------------------------------------------------------------

    def request(self, flow) -> None:
        self.settle()
        writer = self.writer
        if writer is None:
            return
        request = flow.request
        method = request.method
        # The recorded path has secret query values redacted; matching uses the real one.
        ex = Exchange(flow.id, conn_key(flow.client_conn.id), method, writer.redactor.url(request.path))
        self.exchanges[flow.id] = ex
        # One pass over the raw header fields; every lookup below reads this (lower-case) dict.
        headers = ex.req_headers = self._headers(request.headers)
        ex.req_content_type = headers.get("content-type")
        session_id = headers.get(SESSION_ID) or None
        if method == "POST":
            legacy = self.book.endpoint_session(request.host, request.port, request.path)
            body = request.raw_content or b""
            if body and "content-encoding" in headers:
                body = request.get_content(strict=False) or b""
            if legacy is not None:
                ex.session, ex.transport = legacy, LEGACY
            elif session_id is not None:
                ex.session = session_id
            ex.mcp = (
                legacy is not None
                or session_id is not None
                or is_json(ex.req_content_type)
                or PROTOCOL_VERSION in headers
                or METHOD in headers
                or looks_json(body)
            )
            if ex.mcp:
                self._request_body(ex, body, headers)
        elif method == "GET":
            # The Streamable HTTP GET stream carries a session; legacy `GET /sse` carries nothing.
            ex.mcp = session_id is not None or "text/event-stream" in headers.get("accept", "")
            ex.session = session_id
        elif method == "DELETE":
            ex.mcp = session_id is not None
            ex.session = session_id
        if ex.session is not None:
            self._record_request(ex)
            self._flush()

    def _request_body(self, ex: Exchange, body: bytes, headers: dict[str, str]) -> None:
        ex.req_ts = now()
        if not body:
            ex.req_problems.append(("empty-body", f"{ex.method} {ex.path} without a body", None))
            return
        try:
            message = jsonrpc.decode(body)
        except jsonrpc.NotJson as exc:
            ex.req_problems.append(("not-json", exc.reason, body))
            return
        except jsonrpc.InvalidMessage as exc:
            ex.req_problems.append(("invalid-message", exc.reason, body))
            return
        ex.req_raw, ex.req_message = json_text(body), message
        if not isinstance(message, jsonrpc.Batch):
            version = meta_version(getattr(message, "params", None)) or headers.get(PROTOCOL_VERSION)
            for code, detail in method_header_problems(message, headers, version=version, transport=ex.transport):
                ex.req_problems.append((code, detail, None))

    def resolve(self, ex: Exchange, flow) -> str:
        """The exchange's session key, deciding it now if the request did not name one."""
        if ex.session is None:
            response = flow.response
            minted = None
            if response is not None and 200 <= response.status_code < 300:
                minted = self._resp_headers(ex, response).get(SESSION_ID)
            ex.session = minted or ex.conn
            self._record_request(ex)
        return ex.session

    def _record_request(self, ex: Exchange) -> None:
        """Record the request's message and problems, now that its session key is known."""
        if not ex.mcp:
            return
        ts = ex.req_ts
        for code, detail, raw in ex.req_problems:
            self._violation(ex, C2S, ts, code, detail, raw)
        ex.req_problems = []
        message = ex.req_message
        if message is None:
            return
        extra = {
            "flow": ex.flow_id,
            "http": {"method": ex.method, "path": ex.path, "content_type": ex.req_content_type, "headers": ex.req_headers},
        }
        if ex.transport != STREAMABLE:
            extra["transport"] = ex.transport
        self._lines.append(self.writer.encode_message(ex.session, C2S.value, ex.req_raw, ts, extra))
        ex.req_message = ex.req_raw = None
        self._observe(ex, C2S, message, ts)

    # ---- responses ------------------------------------------------------------------------------

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
        self._event(
            ex, Kind.STREAM, None, now(), event="open", conn=ex.conn, method=ex.method, path=ex.path,
            status=ex.resp_status, content_type=ex.resp_content_type, headers=headers,
        )
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
            self._event(ex, Kind.STREAM, None, ts, event="close", conn=ex.conn, method=ex.method, path=ex.path, events=tap.events, bytes=tap.size)

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

    def response(self, flow) -> None:
        self.settle()
        ex = self.exchanges.pop(flow.id, None)
        if ex is None:
            return
        response = flow.response
        self._resp_headers(ex, response)
        self.resolve(ex, flow)
        tap = ex.tap
        fields: dict = {}
        if tap is not None:
            if not tap.started:  # the body ended with the headers: mitmproxy never called the tap
                tap(response.get_content(strict=False) or b"")
                tap(b"")
                self.settle()
        else:
            body = response.raw_content or b""
            if body and "content-encoding" in ex.resp_headers:  # as the request's (`get_content` costs)
                body = response.get_content(strict=False) or b""
            recorded = bool(body) and ex.mcp and self._response_body(ex, body)
            if body and (not recorded or response.status_code >= 400):
                fields = body_fields(body)
        self._http(ex, flow, fields)
        self._end(ex, response.status_code)
        self._flush()

    def _response_body(self, ex: Exchange, body: bytes) -> bool:
        """Record a buffered body's JSON-RPC message; False when it holds none."""
        json_type = is_json(ex.resp_content_type)
        if not (json_type or looks_json(body)):
            return False
        ts = now()
        try:
            message = jsonrpc.decode(body)
        except jsonrpc.NotJson as exc:
            if json_type:
                self._violation(ex, S2C, ts, "not-json", f"{ex.resp_content_type} body: {exc.reason}", body)
            return False
        except jsonrpc.InvalidMessage as exc:
            self._violation(ex, S2C, ts, "invalid-message", exc.reason, body)
            return False
        self._response_message(ex, json_text(body), message, ts, None)
        return True

    def _response_message(self, ex: Exchange, raw: bytes, message, ts: float, sse: dict | None) -> None:
        http = {
            "method": ex.method,
            "path": ex.path,
            "status": ex.resp_status,
            "content_type": ex.resp_content_type,
            "headers": ex.resp_headers,
        }
        extra: dict = {"flow": ex.flow_id, "http": http}
        if sse is not None:
            extra["sse"] = sse
        if ex.transport != STREAMABLE:
            extra["transport"] = ex.transport
        self._lines.append(self.writer.encode_message(ex.session, S2C.value, raw, ts, extra))
        self._observe(ex, S2C, message, ts)

    def _resp_headers(self, ex: Exchange, response) -> dict[str, str]:
        if ex.resp_headers is None:
            headers = ex.resp_headers = self._headers(response.headers)
            ex.resp_status = response.status_code
            ex.resp_content_type = headers.get("content-type")
        return ex.resp_headers

    # ---- failures and endings -------------------------------------------------------------------

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

    def error(self, flow) -> None:
        self.settle()
        ex = self.exchanges.pop(flow.id, None)
        if ex is None:
            return
        if flow.response is not None:
            self._resp_headers(ex, flow.response)
        self.resolve(ex, flow)
        detail = flow.error.msg if flow.error else "unknown error"
        if ex.tap is None:
            self._event(ex, Kind.ERROR, None, now(), detail=detail, conn=ex.conn, method=ex.method, path=ex.path)
        self._http(ex, flow, {"error": detail})
        self._end(ex, ex.resp_status)
        self._flush()

    def _end(self, ex: Exchange, status: int | None) -> None:
        """Session endings: a DELETE that succeeded, a legacy stream that ended."""
        if not ex.mcp:
            return
        if ex.method == "DELETE" and status is not None and 200 <= status < 300:
            self._close_session(ex, ex.session, keep=True)
        elif ex.method == "GET" and ex.transport == LEGACY and ex.tap is not None:
            self._close_session(ex, ex.session, keep=False)
            self.book.forget_endpoints(ex.session)

    def client_disconnected(self, client) -> None:
        self.settle()
        key = conn_key(client.id)
        if key in self.book and self.writer is not None:
            self._close_session(None, key, keep=False)
            self._flush()

    def _close_session(self, ex: Exchange | None, key: str, *, keep: bool) -> None:
        """Close a session (violations only); `keep` it to flag messages that come after."""
        for item in self.book.close(key, keep=keep):
            self._session_violation(ex, key, item, now())

    def done(self) -> None:
        """The proxy is stopping: end open streams and exchanges, close every session."""
        self.settle()
        if self.writer is None:
            return
        ts = now()
        for ex in list(self.exchanges.values()):
            if ex.session is None:
                ex.session = ex.conn
                self._record_request(ex)
            if ex.tap is not None and not ex.tap.closed:
                ex.tap.closed = True
                self._event(
                    ex, Kind.STREAM, None, ts, event="close", conn=ex.conn, method=ex.method, path=ex.path,
                    events=ex.tap.events, bytes=ex.tap.size, reason="proxy stopped",
                )
            elif ex.mcp:
                self._event(
                    ex, Kind.ERROR, None, ts, detail="the proxy stopped before the exchange ended",
                    conn=ex.conn, method=ex.method, path=ex.path,
                )
        self.exchanges.clear()
        for key in self.book.keys():
            self._close_session(None, key, keep=False)
        self.book.clear_endpoints()
        self._write_now()

    # ---- events ---------------------------------------------------------------------------------

    def _observe(self, ex: Exchange, direction: Direction, message, ts: float) -> None:
        version = ex.req_headers.get(PROTOCOL_VERSION)
        for item in self.book.observe(ex.session, direction, message, ts, legacy=ex.transport == LEGACY, version=version):
            self._session_violation(ex, ex.session, item, ts)

    def _session_violation(self, ex: Exchange | None, key: str, item: Violation, ts: float) -> None:
        event = {"ts": ts, "session": key, "dir": item.direction.value if item.direction else None, "kind": Kind.VIOLATION}
        if ex is not None:
            event["flow"] = ex.flow_id
            if ex.transport != STREAMABLE:
                event["transport"] = ex.transport
        event["code"], event["detail"] = item.code, item.detail
        self._lines.append(self.writer.encode(event))

    def _violation(self, ex: Exchange, direction: Direction, ts: float, code: str, detail: str, raw: bytes | None) -> None:
        fields = {"code": code, "detail": detail}
        if raw is not None:
            fields.update(body_fields(raw, "raw"))
        self._event(ex, Kind.VIOLATION, direction, ts, **fields)

    def _event(self, ex: Exchange, kind: str, direction: Direction | None, ts: float, **fields) -> None:
        event = {"ts": ts, "session": ex.session, "dir": direction.value if direction else None, "kind": kind, "flow": ex.flow_id}
        if ex.transport != STREAMABLE:
            event["transport"] = ex.transport
        event.update(fields)
        self._lines.append(self.writer.encode(event))

    def _http(self, ex: Exchange, flow, fields: dict) -> None:
        request, response = flow.request, flow.response
        event = {
            "ts": now(),
            "session": ex.session if ex.mcp else None,
            "dir": None,
            "kind": Kind.HTTP,
            "flow": ex.flow_id,
            "conn": ex.conn,
            "mcp": ex.mcp,
            "method": ex.method,
            "url": url_of(request, ex.path),
            "path": ex.path,
            "http_version": request.http_version,
            "request_content_type": ex.req_content_type,
            "request_headers": ex.req_headers,
            "request_size": len(request.raw_content or b""),
            "started": round(request.timestamp_start, 6),
            "status": ex.resp_status,
        }
        if ex.mcp and ex.transport != STREAMABLE:
            event["transport"] = ex.transport
        if response is not None:
            event["reason"] = response.reason
            event["content_type"] = ex.resp_content_type
            event["response_headers"] = ex.resp_headers
            if response.timestamp_start:
                event["responded"] = round(response.timestamp_start, 6)
            if response.timestamp_end:
                event["ended"] = round(response.timestamp_end, 6)
            if ex.tap is not None:
                event["streamed"] = True
                event["response_size"] = ex.tap.size
            else:
                event["response_size"] = len(response.raw_content or b"")
        event.update(fields)
        self._lines.append(self.writer.encode(event))


# ---- the addon ----------------------------------------------------------------------------------


class McpRecorder:
    """The recording addon: options and the trace file, the SSE tap, each HTTP exchange.

    One object: mitmproxy offers every event to every addon object, so each extra object costs a
    dispatch per event on the proxy's hot path. The trace file is opened in `configure` and closed
    last in `done`.
    """

    def __init__(self, recording: Recording, *, exit_on_failure: bool = False) -> None:
        self.recording = recording
        self.exit_on_failure = exit_on_failure
        self.running_ = False  # mitmproxy has started (options set now are changes, not start-up)
        self.rolling_back = False  # an OptionsError was raised: mitmproxy's next configure undoes the change

    def running(self) -> None:
        self.running_ = True

    def load(self, loader) -> None:
        logging.getLogger(MITMPROXY_SERVER_LOGGER).addFilter(_QUIET_STREAMING)
        loader.add_option(
            "mcpbench_out", str, "",
            "mcpbench: the trace file to write (JSON Lines); empty: results/traces/<time>-http.jsonl.",
        )
        loader.add_option(
            "mcpbench_redact", Sequence[str], [],
            "mcpbench: also redact this header / JSON key (a name) or JSON path (a.b.*.c). Repeatable.",
        )

    def configure(self, updated: set[str]) -> None:
        if updated & {"connection_strategy", "mcpbench_out"} and getattr(ctx.options, "connection_strategy", None) == "eager":
            # Eager connects upstream when a client connects, before any request: an upstream that
            # refuses or resets then drops the client with no answer and no flow to record. Lazy
            # connects per request, so the client gets mitmproxy's 502 naming the cause and the
            # trace gets the exchange's `error` event.
            ctx.options.update(connection_strategy="lazy")
        if "mcpbench_out" not in updated and "mcpbench_redact" not in updated:
            return
        if self.rolling_back:  # mitmproxy restoring the options before a refused change: keep as is
            self.rolling_back = False  # (at start that is an empty mcpbench_out: no stray default trace)
            return
        modes = list(ctx.options.mode)
        header = {"recorder": "mitmproxy", "mitmproxy": mitmproxy_version.VERSION, "mode": modes}
        upstreams = [mode.split(":", 1)[1] for mode in modes if mode.startswith("reverse:")]
        if upstreams:  # what the trace header names for a tee's command (docs/trace-format.md)
            header["upstream"] = upstreams[0] if len(upstreams) == 1 else upstreams
        try:
            self.recording.open(ctx.options.mcpbench_out, ctx.options.mcpbench_redact, header)
        except TraceError as exc:
            self.recording.open_error = exc
            if self.exit_on_failure and not self.running_:
                # At mitmdump's start an exception here is logged with a traceback and mitmdump
                # exits 1: say it in one line and end with our exit status instead. Later (an
                # option changed in a running mitmproxy) the OptionsError rejects the change.
                print(f"mcpbench: {exc}", file=sys.stderr, flush=True)
                raise SystemExit(getattr(exc, "exit_code", EXIT_INPUT)) from None
            self.rolling_back = True
            raise exceptions.OptionsError(str(exc)) from None

    def request(self, flow) -> None:
        self.recording.request(flow)

    def responseheaders(self, flow) -> None:
        """Streams a `text/event-stream` answer through a recording callable, never buffering it."""
        self.recording.response_headers(flow)

    def response(self, flow) -> None:
        if detail := flow.metadata.get(TIMED_OUT):  # our 504 for a silent upstream (record/timeout.py)
            flow.error = Error(detail)  # recorded as a failed exchange, with this cause
            self.recording.error(flow)
        else:
            self.recording.response(flow)

    def error(self, flow) -> None:
        self.recording.stream_error(flow)
        self.recording.error(flow)

    def client_disconnected(self, client) -> None:
        self.recording.client_disconnected(client)

    def done(self) -> None:
        logging.getLogger(MITMPROXY_SERVER_LOGGER).removeFilter(_QUIET_STREAMING)
        recording = self.recording
        recording.done()
        recording.close_writer()
        if recording.failed and self.exit_on_failure:
            # In mitmdump, as its own save addon does: the reason was said when it happened; the
            # proxy kept serving, and now ends non-zero.
            raise SystemExit(TraceWriteError.exit_code)


def make_addons(*, exit_on_failure: bool = False) -> list:
    """A fresh recording addon (a list of one, as mitmproxy scripts name theirs).

    `exit_on_failure`: end the process non-zero at `done` when the trace could not be written to
    the end (for mitmdump; `mcpbench record` reads `Recording.failed` itself).
    """
    return [McpRecorder(Recording(), exit_on_failure=exit_on_failure)]


# mitmdump -s: the recording, and a 504 for an upstream that does not answer in time.
addons = [*make_addons(exit_on_failure=True), UpstreamTimeout()]
