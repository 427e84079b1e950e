"""A mitmproxy addon that records the MCP traffic passing through the proxy as an mcpbench trace.

Load it as any mitmproxy script, in reverse mode or in regular proxy mode (clients then set
HTTP(S)_PROXY and trust mitmproxy's CA for https upstreams)::

    mitmdump --mode reverse:http://127.0.0.1:8000 -s "$(mcpbench addon-path)" --set mcpbench_out=t.jsonl

`mcpbench record` runs the same addon in-process. The trace has the format of the stdio tee's
(docs/trace-format.md, HTTP kinds in docs/trace-format-http.md): one `message` event per JSON-RPC
message with its HTTP context, one `http` event per HTTP exchange, `stream` events when an SSE stream
opens, ends or breaks, `sse` events for SSE comments and events that carry no message, and
`violation` and `error` events.

The observed session never breaks:

- Event-stream answers are streamed through unbuffered and recorded as they pass (`streams.py`).
- Bodies that are not JSON, broken SSE, disconnects and upstream errors pass through as they are and
  are recorded as `violation`, `stream` or `error` events. Requests that are not MCP pass untouched
  and are recorded as `http` events only (`classify.py` tells them apart).
- Secrets are redacted by the trace writer's `Redactor` (Authorization and cookies by default;
  OAuth's tokens, client secrets, codes and refresh tokens in the bodies and forms of the discovery
  and token requests that pass, which are recorded as `http` events with their bodies).
- The upstream gets the client's `Host` (`mcpbench_host_header`): in reverse mode mitmproxy would
  rewrite it to the upstream's address, and an upstream that checks `Host` against DNS rebinding
  would never see the client's. The trace records the header as the client sent it.

`McpRecorder` follows each exchange from request to answer and is composed of plain parts, one
concern each: `TraceOutput` (`output.py`: the trace file and the event encoders), `SessionBook`
(`sessions.py`: session keys and each session's state), `classify` (`classify.py`: what a request
is), `SseTap` (`streams.py`: an SSE answer's bytes, recorded before they are forwarded) and
`UpstreamTimeout` (`timeout.py`: the 504 for a silent upstream). Bytes become messages, or the
violations that say why they are none, only in the protocol core's observer (`observer.py`):
`read_body` for a request's or an answer's body, `SseObserver` (in the tap) for an event stream,
its legacy `endpoint` event included.

Everything here runs on mitmproxy's event loop, one hook at a time, on the proxy's hot path: per
request the work is one JSON decode, one session step and a few `os.write`s.
"""

import logging
import sys
from collections.abc import Sequence

from mitmproxy import ctx, exceptions
from mitmproxy import version as mitmproxy_version
from mitmproxy.flow import Error

from mcpbench.protocol.auth import FORM
from mcpbench.protocol.errors import TraceError, TraceWriteError
from mcpbench.protocol.http import (
    AUTHENTICATE, FOREIGN_ANSWER_ID, PROTOCOL_VERSION, SESSION_ID, foreign_id_warning, legacy_session_key, pair_with_post,
    resolve_endpoint,
)
from mcpbench.protocol.jsonrpc import ErrorResponse, Request
from mcpbench.protocol.media import is_event_stream, media_type
from mcpbench.protocol.observer import EndpointEvent, Observed, Violation, read_body
from mcpbench.protocol.session import C2S, S2C, Direction
from mcpbench.protocol.sse import SseComment, SseEvent
from mcpbench.protocol.transports import LEGACY_SSE
from mcpbench.proxies.host import stock_host_stops
from mcpbench.proxies.upstream import FreshUpstream
from mcpbench.record.classify import classify
from mcpbench.record.exchange import HttpExchange, body_fields, json_text, url_of, wire_text
from mcpbench.record.gateway import answer_bad_gateway
from mcpbench.record.hosts import HOST_HEADER_MODES, HostHeader
from mcpbench.record.output import TraceOutput
from mcpbench.record.sessions import SessionBook, conn_key
from mcpbench.record.streams import SseTap
from mcpbench.record.timeout import TIMED_OUT, UpstreamTimeout
from mcpbench.trace.format import Kind, now

# mitmdump's exit status when the trace cannot be created (unusable --set mcpbench_out).
EXIT_INPUT = 2
# The options whose change `configure` reads (the others belong to other addons).
OWN_OPTIONS = frozenset({"mcpbench_out", "mcpbench_redact"})

# The `error` of an exchange still open when the proxy stops.
STOPPED = "the proxy stopped before the exchange ended"

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


class McpRecorder:
    """The recording addon: its options, and each HTTP exchange from request to answer.

    One addon object, composed of plain parts: mitmproxy offers every event to every addon object,
    so each extra one costs a dispatch per event on the proxy's hot path. Every hook collects its
    events in `output` and writes them with one `os.write` (`output.flush`) before it returns: a
    request is in the file before mitmproxy sends it on, and so is each chunk of an SSE answer (its
    `SseTap`). The trace file is opened in `configure` and closed last in `done`.

    Args:
        exit_on_failure: end the process non-zero at `done` when the trace could not be written to
            the end, and at start-up when it cannot be created (mitmdump; `mcpbench record` reads
            `output` itself).
        timeout: the upstream time-out, driven from these hooks (`timeout.py`), or None.
    """

    def __init__(self, *, exit_on_failure: bool = False, timeout: UpstreamTimeout | None = None) -> None:
        self.output = TraceOutput()
        self.sessions = SessionBook()
        self.exchanges: dict[str, HttpExchange] = {}  # open exchanges by flow id
        self.exit_on_failure = exit_on_failure
        self.timeout = timeout
        self.upstream = FreshUpstream()  # no request on a dead or long-idle upstream connection
        self.host_header = HostHeader()
        self.running_ = False  # mitmproxy has started (options set now are changes, not start-up)
        self.rolling_back = False  # an OptionsError was raised: mitmproxy's next configure undoes the change

    # ---- options ----------------------------------------------------------------------------------

    def running(self) -> None:
        self.running_ = True

    def load(self, loader) -> None:
        logging.getLogger(MITMPROXY_SERVER_LOGGER).addFilter(_QUIET_STREAMING)
        stock_host_stops(ctx.master)  # in mitmdump: SIGHUP stops it cleanly, a cut connection prints no traceback
        if self.timeout is not None:
            self.timeout.load(loader)
        loader.add_option(
            "mcpbench_out", str, "",
            "mcpbench: the trace file to write (JSON Lines); empty: results/traces/<time>-http.jsonl.",
        )
        loader.add_option(
            "mcpbench_redact", Sequence[str], [],
            "mcpbench: also redact this header / JSON key (a name) or JSON path (a.b.*.c). Repeatable.",
        )
        loader.add_option(
            "mcpbench_host_header", str, "auto",
            "mcpbench (reverse mode): the Host the upstream gets: client (as the client sent it), upstream "
            "(the upstream's address, mitmproxy's default) or auto (client for a loopback upstream, else upstream).",
            choices=list(HOST_HEADER_MODES),
        )

    def configure(self, updated: set[str]) -> None:
        if self.timeout is not None:
            self.timeout.configure(updated)
        if updated & {"connection_strategy", "mcpbench_out"} and getattr(ctx.options, "connection_strategy", None) == "eager":
            # Eager connects upstream when a client connects, before any request: an upstream that
            # refuses or resets then drops the client with no answer and no flow to record. Lazy
            # connects per request, so the client gets mitmproxy's 502 naming the cause and the
            # trace gets the exchange's `error` event.
            ctx.options.update(connection_strategy="lazy")
        if updated & {"mcpbench_host_header", "mode", "keep_host_header"}:
            self.host_header.configure(ctx.options)
        if not updated & OWN_OPTIONS:
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
            self.output.open(ctx.options.mcpbench_out, ctx.options.mcpbench_redact, header)
        except TraceError as exc:
            self.output.open_error = exc
            if self.exit_on_failure and not self.running_:
                # At mitmdump's start an exception here is logged with a traceback and mitmdump
                # exits 1: say it in one line and end with our exit status instead. Later (an
                # option changed in a running mitmproxy) the OptionsError rejects the change.
                print(f"mcpbench: {exc}", file=sys.stderr, flush=True)
                raise SystemExit(getattr(exc, "exit_code", EXIT_INPUT)) from None
            self.rolling_back = True
            raise exceptions.OptionsError(str(exc)) from None

    # ---- requests ---------------------------------------------------------------------------------

    def request(self, flow) -> None:
        output = self.output
        if output.writer is not None:
            request = flow.request
            data = request.data  # read at once: mitmproxy's `method` and `path` properties decode on every read
            # The recorded path has secret query values redacted; matching uses the real one.
            method, path = wire_text(data.method).upper(), data.path.decode("utf-8", "surrogateescape")
            ex = HttpExchange(flow, conn_key(flow.client_conn.id), method, output.writer.redactor.url(path))
            self.exchanges[flow.id] = ex
            # One pass over the raw header fields; every lookup reads this (lower-case) dict.
            headers = ex.req_headers = output.headers(data.headers)
            ex.req_content_type = headers.get("content-type")
            classify(ex, request, headers, self.sessions)
            if ex.session is not None:
                self._record_request(ex)
                output.flush()
        self.host_header.apply(flow)  # after recording: the trace has the Host the client sent
        if self.timeout is not None:  # after recording: the request goes upstream when this returns
            self.timeout.sent(flow)
        self.upstream.before(flow)

    def resolve(self, ex: HttpExchange, flow) -> str:
        """The exchange's session key, deciding it now if the request did not name one."""
        if ex.session is None:
            response = flow.response
            minted = None
            if response is not None and 200 <= response.status_code < 300:
                minted = self._resp_headers(ex, response).get(SESSION_ID)
            ex.session = minted or ex.conn
            self._record_request(ex)
        return ex.session

    def _record_request(self, ex: HttpExchange) -> None:
        """Record the request's message, then its problems, now that its session key is known.

        The message first: a reader learns from it what the problems are of (a sessionless request's
        protocol version, which groups its violations with it)."""
        if not ex.mcp:
            return
        ts = ex.req_ts
        message = ex.req_message
        if message is not None:
            raw, ex.req_message, ex.req_raw = ex.req_raw, None, None
            if type(message) is Request:
                ex.req_call = (message.id, f"{message.method} (id {message.id!r})")
            self._message(ex, C2S, raw, message, ts)
        for item in ex.req_problems:
            self.output.violation(ex, C2S, ts, item.code, item.detail, item.raw)
        ex.req_problems = []

    # ---- answers ----------------------------------------------------------------------------------

    def responseheaders(self, flow) -> None:
        """Streams a `text/event-stream` answer through an `SseTap`, never buffering it."""
        if self.timeout is not None:
            self.timeout.answered(flow)
        ex = self.exchanges.get(flow.id)
        if ex is None:
            return
        response = flow.response
        headers = self._resp_headers(ex, response)
        if not is_event_stream(ex.resp_content_type):
            return
        ex.mcp = True
        if ex.method == "GET" and ex.session is None:
            ex.transport = LEGACY_SSE  # a stream without Mcp-Session-Id: legacy `GET /sse`
        self.resolve(ex, flow)
        encoding = headers.get("content-encoding")
        tap = ex.tap = response.stream = SseTap(self._stream_chunk, ex, flow.request, encoding)
        # Not flushed here: the first chunk (or any other exchange) writes it moments later.
        self.output.stream(ex, now(), "open", {"status": ex.resp_status, "content_type": ex.resp_content_type, "headers": headers})
        if encoding and type(item := tap.observer.next_event()) is Violation:
            tap.closed = True  # an encoding the observer cannot undo: passed through untouched, unread
            self.output.violation(ex, S2C, now(), item.code, item.detail, item.raw)

    def response(self, flow) -> None:
        self.upstream.after(flow)
        if self.timeout is not None:
            self.timeout.answered(flow)  # an answer another addon set comes without `responseheaders`
        if detail := flow.metadata.get(TIMED_OUT):  # our 504 for a silent upstream (record/timeout.py)
            flow.error = Error(detail)  # recorded as a failed exchange, with this cause
            self._failed(flow)
            return
        ex = self._answered(flow)
        if ex is None:
            return
        response = flow.response
        tap = ex.tap
        fields: dict = {}
        if tap is not None:
            if not tap.started:  # the body ended with the headers: mitmproxy never called the tap
                tap(response.get_content(strict=False) or b"")
                tap(b"")
        else:
            body = response.data.content or b""
            if body and "content-encoding" in ex.resp_headers:  # as the request's (`get_content` costs)
                body = response.get_content(strict=False) or b""
            # A challenge's body (401, 403 with WWW-Authenticate) is the authorization layer's, not MCP: kept, not judged.
            challenge = response.status_code in (401, 403) and AUTHENTICATE in ex.resp_headers
            recorded = bool(body) and ex.mcp and not challenge and self._response_body(ex, body)
            if body and (not recorded or response.status_code >= 400):
                fields = body_fields(body)
        self._ended(ex, flow, fields)

    def error(self, flow) -> None:
        """The exchange failed (upstream refused, reset or timed out; a client that left).

        An MCP client whose upstream failed before answering gets a 502 with a JSON-RPC error
        naming the cause (`gateway.py`), recorded as its answer.
        """
        self.upstream.after(flow)
        if self.timeout is not None:
            self.timeout.answered(flow)
        ex = self.exchanges.get(flow.id)
        detail = flow.error.msg if flow.error else "unknown error"
        if ex is not None and ex.tap is not None and not ex.tap.closed:
            self._stream_broke(ex, flow)
        elif ex is not None and ex.mcp and ex.tap is None and answer_bad_gateway(flow, detail, url_of(flow.request, ""), ex.request_id()):
            ex.resp_headers = None  # the answer is ours now, not the upstream's broken one
            self._failed(flow, detail, body_fields(flow.response.content))
            return
        self._failed(flow, detail)

    def _failed(self, flow, detail: str | None = None, fields: dict | None = None) -> None:
        """Record a failed exchange: its `error` event, and its `http` event with `fields` and the error."""
        ex = self._answered(flow)
        if ex is None:
            return
        if detail is None:
            detail = flow.error.msg if flow.error else "unknown error"
        if ex.tap is None:
            self.output.event(ex, Kind.ERROR, None, now(), detail=detail, conn=ex.conn, method=ex.method, path=ex.path)
        self._ended(ex, flow, (fields or {}) | {"error": detail})

    def _answered(self, flow) -> HttpExchange | None:
        """The exchange of `flow`, no longer open, with its answer's head and its session key."""
        ex = self.exchanges.pop(flow.id, None)
        if ex is None:
            return None
        if flow.response is not None:
            self._resp_headers(ex, flow.response)
        self.resolve(ex, flow)
        return ex

    def _ended(self, ex: HttpExchange, flow, fields: dict) -> None:
        """The exchange's `http` event (with `fields`), the session it ends, and the write.

        A form that is not MCP keeps its body too (an OAuth token request's: the writer redacts
        its secrets).
        """
        if not ex.mcp and media_type(ex.req_content_type) == FORM and (sent := flow.request.data.content):
            fields = {**fields, **body_fields(sent, "request_body")}
        self.output.http(ex, flow, fields)
        self._end(ex, ex.resp_status)
        self.output.flush()

    def _response_body(self, ex: HttpExchange, body: bytes) -> bool:
        """Record a buffered body's JSON-RPC message, or why it holds none; False when it holds none."""
        for item in read_body(body, S2C, ex.resp_content_type):  # at most one
            if type(item) is Observed:
                self._message(ex, S2C, json_text(item.raw), item.message, now())
                return True
            self.output.violation(ex, S2C, now(), item.code, item.detail, item.raw)
        return False

    def _resp_headers(self, ex: HttpExchange, response) -> dict[str, str]:
        if ex.resp_headers is None:
            data = response.data
            headers = ex.resp_headers = self.output.headers(data.headers)
            ex.resp_status = data.status_code
            ex.resp_content_type = headers.get("content-type")
        return ex.resp_headers

    # ---- SSE answers ------------------------------------------------------------------------------

    def _stream_chunk(self, tap: SseTap, chunk: bytes, ts: float) -> None:
        """Record what one chunk of an SSE answer (b"": its end) completes, read at `ts`, before it is forwarded."""
        ex = tap.exchange
        output = self.output
        for item in tap.read(chunk):
            kind = type(item)
            if kind is Observed:
                sse = item.sse
                fields = {"event": sse.event} if sse.id is None else {"event": sse.event, "id": sse.id}
                self._message(ex, S2C, json_text(item.raw), item.message, ts, fields)
            elif kind is Violation:
                output.violation(ex, S2C, ts, item.code, item.detail, item.raw)
                if item.code == "sse-line-too-long":
                    tap.closed = True  # the observer reads this stream no further
            elif kind is SseComment:
                output.event(ex, Kind.SSE, S2C, ts, comment=item.text)
            elif kind is EndpointEvent:
                self._endpoint(tap, item, ts)
            else:  # an SSE event that carries no message
                output.event(ex, Kind.SSE, S2C, ts, **_sse_fields(item))
        if chunk:
            output.flush()
        else:  # the end: the `response` hook follows at once and writes this with the `http` event
            tap.closed = True
            output.stream(ex, ts, "close", {"events": tap.observer.events, "bytes": tap.size})

    def _endpoint(self, tap: SseTap, item: EndpointEvent, ts: float) -> None:
        """A legacy stream's `endpoint` event: POSTs to it belong to the session it names from now on.

        POSTs go to the endpoint as sent; the trace (its data, and the session key taken from it)
        gets it with secret query values fingerprinted.
        """
        ex = tap.exchange
        url = resolve_endpoint(tap.request.url, item.data)
        redact = self.output.writer.redactor.url
        fields = _sse_fields(item.sse)
        data = fields["data"] = redact(item.data)
        key = legacy_session_key(data)
        self.sessions.add_endpoint(url, key)
        fields["endpoint"] = redact(url)
        fields["conn_session"] = ex.session
        ex.session, ex.transport = key, LEGACY_SSE
        self.output.event(ex, Kind.SSE, S2C, ts, **fields)

    def _stream_broke(self, ex: HttpExchange, flow) -> None:
        """The SSE answer of `ex` broke: the event it cut short, and the stream's `error` event."""
        tap = ex.tap
        ts = now()
        for item in tap.broken():
            if type(item) is Violation:
                self.output.violation(ex, S2C, ts, item.code, item.detail, item.raw)
        detail = flow.error.msg if flow.error else "stream broken"
        self.output.event(
            ex, Kind.STREAM, None, now(), event="error", conn=ex.conn, method=ex.method, path=ex.path,
            events=tap.observer.events, bytes=tap.size, error=detail,
        )

    # ---- sessions ---------------------------------------------------------------------------------

    def _message(self, ex: HttpExchange, direction: Direction, raw: bytes, message, ts: float, sse: dict | None = None) -> None:
        """Record a message of `ex` (its JSON text `raw`) and show it to its session.

        An error answering a POST under another id is shown to the session as the POST pairs it
        (`pair_with_post`), with a warning when the id is a foreign one; one refusing a GET or a
        DELETE answers no request: a warning, not an answer."""
        self.output.message(ex, direction, raw, ts, sse)
        if direction is S2C and type(message) is ErrorResponse and sse is None:
            request_id, label = ex.req_call or (None, None)
            if request_id is None and message.id is not None and ex.resp_status is not None and ex.resp_status >= 400:
                refused = f"{ex.method} {ex.path}"
                self.output.warning(ex, S2C, ts, FOREIGN_ANSWER_ID, foreign_id_warning(message.id, ex.resp_status, refused, paired=False))
                return
            if (paired := pair_with_post(message, request_id, ex.resp_status)) is not None:
                if message.id is not None:
                    self.output.warning(ex, S2C, ts, FOREIGN_ANSWER_ID, foreign_id_warning(message.id, ex.resp_status, label))
                message = paired
        version = ex.req_headers.get(PROTOCOL_VERSION)
        for item in self.sessions.observe(ex.session, direction, message, ts, legacy=ex.transport == LEGACY_SSE, version=version):
            self.output.session_violation(ex, ex.session, item, ts)

    def _end(self, ex: HttpExchange, status: int | None) -> None:
        """Session endings: a DELETE that succeeded, a legacy stream that ended."""
        if not ex.mcp:
            return
        if ex.method == "DELETE" and status is not None and 200 <= status < 300:
            self._close_session(ex, ex.session, keep=True)
        elif ex.method == "GET" and ex.transport == LEGACY_SSE and ex.tap is not None:
            self._close_session(ex, ex.session, keep=False)
            self.sessions.forget_endpoints(ex.session)

    def client_disconnected(self, client) -> None:
        key = conn_key(client.id)
        if key in self.sessions and self.output.writer is not None:
            self._close_session(None, key, keep=False)
            self.output.flush()

    def _close_session(self, ex: HttpExchange | None, key: str, *, keep: bool) -> None:
        """Close a session (violations only); `keep` it to flag messages that come after."""
        for item in self.sessions.close(key, keep=keep):
            self.output.session_violation(ex, key, item, now())

    # ---- the end ----------------------------------------------------------------------------------

    def done(self) -> None:
        """The proxy is stopping: end open streams and exchanges, close every session and the trace."""
        logging.getLogger(MITMPROXY_SERVER_LOGGER).removeFilter(_QUIET_STREAMING)
        if self.timeout is not None:
            self.timeout.done()
        if self.output.writer is not None:
            self._stopped()
        self.output.close()
        if self.output.failed and self.exit_on_failure:
            # In mitmdump, as its own save addon does: the reason was said when it happened; the
            # proxy kept serving, and now ends non-zero.
            raise SystemExit(TraceWriteError.exit_code)

    def _stopped(self) -> None:
        """The events of what the proxy's stop cuts short, and every session closed.

        Each exchange still open ends here as the client saw it end: its stream closed, an `error`
        event for a call whose answer had not ended (a request without its answer, a POST's SSE
        answer still streaming), and its `http` event (the status and headers the client got, if
        any, and the error), so a HAR export has it.
        """
        output = self.output
        ts = now()
        for ex in list(self.exchanges.values()):
            if ex.session is None:
                ex.session = ex.conn
                self._record_request(ex)
            streaming = ex.tap is not None
            if streaming and not ex.tap.closed:
                ex.tap.closed = True
                output.event(
                    ex, Kind.STREAM, None, ts, event="close", conn=ex.conn, method=ex.method, path=ex.path,
                    events=ex.tap.observer.events, bytes=ex.tap.size, reason="proxy stopped",
                )
            if ex.mcp and (not streaming or ex.method == "POST"):  # a GET stream is no call
                output.event(ex, Kind.ERROR, None, ts, detail=STOPPED, conn=ex.conn, method=ex.method, path=ex.path)
            if ex.flow.response is not None:
                self._resp_headers(ex, ex.flow.response)
            output.http(ex, ex.flow, {"error": STOPPED})
        self.exchanges.clear()
        for key in self.sessions.keys():
            self._close_session(None, key, keep=False)
        self.sessions.clear_endpoints()
        output.flush()


def _sse_fields(item: SseEvent) -> dict:
    """An SSE event's fields as an `sse` trace event holds them."""
    fields: dict = {"event": item.event}
    if item.id is not None:
        fields["id"] = item.id
    if item.retry is not None:
        fields["retry"] = item.retry
    if item.data is not None:
        fields["data"] = item.data
    return fields


def make_addons(*, exit_on_failure: bool = False, upstream_timeout: bool = False) -> list:
    """A fresh recording addon (a list of one, as mitmproxy scripts name theirs).

    `exit_on_failure`: end the process non-zero at `done` when the trace could not be written to
    the end (for mitmdump; `mcpbench record` reads `McpRecorder.output` itself). `upstream_timeout`:
    answer 504 for an upstream that does not answer in time (the `mcpbench_upstream_timeout` option).
    """
    timeout = UpstreamTimeout() if upstream_timeout else None
    return [McpRecorder(exit_on_failure=exit_on_failure, timeout=timeout)]


# mitmdump -s: the recording, with a 504 for an upstream that does not answer in time.
addons = make_addons(exit_on_failure=True, upstream_timeout=True)
