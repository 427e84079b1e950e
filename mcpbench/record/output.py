"""The trace output of the recording addon: the trace file, and the encoding of every event.

`TraceOutput` is one part the addon is composed of (`addon.py`): the addon hands it what happened,
each exchange's part as an `HttpExchange`, and it collects the encoded lines; the addon writes them
with one `os.write` (`flush`) before each hook returns, so a request is in the file before
mitmproxy sends it on. Header blocks are redacted once and cached: clients and servers repeat them
on every exchange.
"""

import logging
from collections.abc import Sequence

from mcpbench.protocol.session import C2S, Direction, Violation
from mcpbench.record.exchange import LATIN1, HttpExchange, body_fields, url_of, wire_text
from mcpbench.protocol.transports import STREAMABLE_HTTP
from mcpbench.trace.format import FORMAT_VERSION, Kind, now
from mcpbench.trace.redact import Redactor
from mcpbench.trace.writer import TraceWriter, default_trace_path

logger = logging.getLogger(__name__)

# Distinct header blocks whose redacted form is kept: a few per client and server, times the
# sessions of a load test; the cache is simply emptied when full.
HEADER_CACHE_SIZE = 1024
# Distinct header fields whose redacted form is kept: each block's fields, plus the values that
# change per exchange (Date, Content-Length); emptied when full.
FIELD_CACHE_SIZE = 4096

# The label of a trace file written to the default folder (no `mcpbench_out`).
DEFAULT_LABEL = "http"


class TraceOutput:
    """The trace writer, the lines collected for it, and the encoders of the HTTP event kinds.

    Every encoder appends one line; nothing is written until `flush`. `writer` is None before
    `open` and after `close`: the addon records nothing then.
    """

    def __init__(self) -> None:
        self.writer: TraceWriter | None = None
        self.settings: tuple | None = None
        self.events_written = 0  # the count of the last writer closed
        self.failed: str | None = None  # why the last writer stopped recording (said on stderr), or None
        self.open_error = None  # the TraceError that kept the trace from being created, or None
        self._lines: list[bytes] = []
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
        writer = TraceWriter(path, transport=STREAMABLE_HTTP, header=header, redactor=redactor)
        self.close()
        self.writer, self.settings = writer, settings
        self._header_cache.clear()
        self._field_cache.clear()
        logger.info(f"mcpbench: recording MCP traffic to {writer.path}")

    def close(self) -> None:
        """Write what is collected and close the trace (`events_written` and `failed` say how it went)."""
        if self.writer is not None:
            self.flush()
            self.events_written = self.writer.events
            self.writer.close()
            self.failed = self.writer.failed
            self.writer = None

    def flush(self) -> None:
        """Write the collected lines now, with one `os.write`.

        At once rather than at the end of the loop's turn: a `call_soon` round per hook cost more
        CPU than the few writes it saved by coalescing, and nothing waits in memory.
        """
        if self._lines and self.writer is not None:
            lines, self._lines = self._lines, []
            self.writer.write_lines(lines)

    def headers(self, headers) -> dict[str, str]:
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

    # ---- events ---------------------------------------------------------------------------------

    def message(self, ex: HttpExchange, direction: Direction, raw: bytes, ts: float, sse: dict | None = None) -> None:
        """A JSON-RPC message of `ex` whose JSON text (one line) is `raw`; `sse`: its SSE event's fields."""
        if direction is C2S:
            http = (ex.method, ex.path, None, ex.req_content_type, ex.req_headers)
        else:
            http = (ex.method, ex.path, ex.resp_status, ex.resp_content_type, ex.resp_headers)
        transport = ex.transport if ex.transport != STREAMABLE_HTTP else None
        self._lines.append(self.writer.encode_flow_message(ex.session, direction.value, raw, ts, ex.flow_id, http, transport, sse))

    def stream(self, ex: HttpExchange, ts: float, event: str, fields: dict) -> None:
        """A `stream` event of `ex`'s SSE answer: `open` (its status, content type, headers) or `close`."""
        self._lines.append(self.writer.encode_flow_stream(
            ts, ex.flow_id, ex.session, ex.transport, event, ex.conn, ex.method, ex.path, fields,
        ))

    def session_violation(self, ex: HttpExchange | None, key: str, item: Violation, ts: float) -> None:
        event = {"ts": ts, "session": key, "dir": item.direction.value if item.direction else None, "kind": Kind.VIOLATION}
        if ex is not None:
            event["flow"] = ex.flow_id
            if ex.transport != STREAMABLE_HTTP:
                event["transport"] = ex.transport
        event["code"], event["detail"] = item.code, item.detail
        self._lines.append(self.writer.encode(event))

    def violation(self, ex: HttpExchange, direction: Direction, ts: float, code: str, detail: str, raw: bytes | None) -> None:
        fields = {"code": code, "detail": detail}
        if raw is not None:
            fields.update(body_fields(raw, "raw"))
        self.event(ex, Kind.VIOLATION, direction, ts, **fields)

    def warning(self, ex: HttpExchange, direction: Direction, ts: float, code: str, detail: str) -> None:
        self.event(ex, Kind.WARNING, direction, ts, code=code, detail=detail)

    def event(self, ex: HttpExchange, kind: str, direction: Direction | None, ts: float, **fields) -> None:
        event = {
            "v": FORMAT_VERSION,
            "ts": ts,
            "session": ex.session,
            "transport": ex.transport,
            "dir": direction.value if direction else None,
            "kind": kind,
            "flow": ex.flow_id,
        }
        event.update(fields)
        self._lines.append(self.writer.encode_flow_event(event))

    def http(self, ex: HttpExchange, flow, fields: dict) -> None:
        """The exchange's `http` event, with `fields` (free text: a body, an error), in the line's
        order (`encode_flow_event`); the writer leaves out what earlier lines said."""
        request, response = flow.request, flow.response
        # The parts read from the messages' data at once: mitmproxy's properties decode on every read.
        sent = request.data
        event = {
            "v": FORMAT_VERSION,
            "ts": now(),
            "session": ex.session if ex.mcp else None,
            "transport": ex.transport if ex.mcp else STREAMABLE_HTTP,
            "dir": None,
            "kind": Kind.HTTP,
            "flow": ex.flow_id,
            "conn": ex.conn,
            "mcp": ex.mcp,
            "method": ex.method,
            "url": url_of(request, ex.path),
            "path": ex.path,
            "http_version": wire_text(sent.http_version),
            "request_content_type": ex.req_content_type,
            "request_headers": ex.req_headers,
            "request_size": len(sent.content or b""),
            "started": round(sent.timestamp_start, 6),
            "status": ex.resp_status,
        }
        if response is not None:
            answer = response.data
            event["reason"] = wire_text(answer.reason, LATIN1)
            event["content_type"] = ex.resp_content_type
            event["response_headers"] = ex.resp_headers
            if answer.timestamp_start:
                event["responded"] = round(answer.timestamp_start, 6)
            if answer.timestamp_end:
                event["ended"] = round(answer.timestamp_end, 6)
            if ex.tap is not None:
                event["streamed"] = True
                event["response_size"] = ex.tap.size
            else:
                event["response_size"] = len(answer.content or b"")
        if fields:
            event.update(fields)
        self._lines.append(self.writer.encode_flow_event(event, text=bool(fields)))
