"""`serve-trace`: a mock MCP server that answers from a recording.

`TraceAnswers` is the I/O-free core: every recorded call is filed under a key,
the canonical JSON of its method and params without `_meta` (so ids, progress
tokens and the 2026-07-28 envelope do not matter). Each client session is
answered from the start of the recording, in the era it speaks (a handshake
client from the handshake-era sessions, a 2026-07-28 client from the others;
an error when the recording has none): repeated identical calls get their
answers in recorded order, and once a key runs dry its last answer is reused.
`initialize` and `server/discover` are
keyed on the method alone (their params describe the client), so any client
gets the recorded capabilities. An unrecorded request gets a JSON-RPC error
naming the nearest recorded request (same method, most similar params), or,
with a `Forwarder` (`--on-miss forward URL`), the answer of a live server.

Three thin servers sit on top: stdio (newline-delimited JSON-RPC on
stdin/stdout), Streamable HTTP (`POST /mcp`; answers recorded as SSE are
re-emitted as SSE with their notifications and server requests, JSON ones as
JSON) and legacy HTTP+SSE (`GET /sse` + `POST /messages/?session_id=…`).
"""

import difflib
import http.server
import itertools
import os
import queue
import sys
import threading
import time
import uuid
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from mcpbench.fdio import write_all
from mcpbench.listen import bind_error
from mcpbench.protocol import jsonrpc
from mcpbench.protocol import http as mcphttp
from mcpbench.protocol.framing import Line, LineFramer
from mcpbench.protocol.jsonrpc import ErrorResponse, Notification, Request, Response
from mcpbench.protocol.session import C2S, S2C, Exchange, Session
from mcpbench.protocol.sse import SseEvent
from mcpbench.protocol.versions import Era, era_title, request_era
from mcpbench.protocol.sse import encode as sse_encode
from mcpbench.replay.forward import Forwarder
from mcpbench.replay.plan import Ask, RecordedCall, TracePlan, call_name, progress_token

# JSON-RPC error for a request the recording has no answer to (JSON-RPC "method not found"
# fits a method never recorded; the same code keeps clients' handling simple for both cases).
NOT_RECORDED = -32601

# Requests whose params describe the client, not what it asks: matched on the method alone.
CLIENT_DESCRIBING = frozenset({"initialize", "server/discover"})

# JSON-RPC error for a client whose era the recording has no session of (-32600, invalid
# request: the request is fine, but not for this recording).
WRONG_ERA = -32600

# How long the mock waits for a client to answer a recorded server request before it
# sends the recorded final answer anyway.
ASK_TIMEOUT = 10.0

# How much of the nearest recorded params an error message shows.
NEAREST_CHARS = 200

READ_SIZE = 64 * 1024

# The one client session a stdio mock serves, as a `Forwarder` session key.
STDIO_SESSION = "stdio"


def match_key(method: str, params: Any) -> bytes:
    """The key a request is matched on: method + params, without `_meta`."""
    if method in CLIENT_DESCRIBING:
        return orjson.dumps([method])
    if isinstance(params, dict) and "_meta" in params:
        params = {k: v for k, v in params.items() if k != "_meta"}
    return orjson.dumps([method, params or None], option=orjson.OPT_SORT_KEYS)


@dataclass(slots=True)
class RecordedReply:
    """What the mock sends for one request: notifications and server requests first, then the answer."""

    answer: dict  # {"result": …} or {"error": …}
    notifications: list[dict] = field(default_factory=list)
    asks: list[Ask] = field(default_factory=list)
    via: str | None = None  # how the recording carried the answer: "sse", "json", "stdio"
    relay: Callable | None = None  # not recorded: `relay(request, send, ask)` answers live instead


class _Cursor:
    """Where one client session is in the recording: per match key, how many answers it has had."""

    __slots__ = ("era", "index", "taken")

    def __init__(self, era: Era | None, index: dict[bytes, tuple[RecordedCall, ...]] | None) -> None:
        self.era = era
        self.index = index  # None: the recording has no session in this client's era
        self.taken: dict[bytes, int] = {}


class TraceAnswers:
    """The recorded answers of a trace, by match key, replayed from the start for each client session.

    Each client session (`session` key: the stdio process, an `Mcp-Session-Id`, a legacy
    stream) has a cursor of its own, so the same client run twice gets the same answers. A
    session speaks an era: `initialize` opens a handshake-era one, `server/discover` or a
    request with the 2026-07-28 `_meta` envelope a stateless one, and it is answered only
    from the recorded sessions of that era (plus those whose era the recording does not
    show). Stateless HTTP clients send no session id: they share one cursor, which
    `server/discover` (how such a client starts) moves back to the start. Thread-safe.
    """

    # Client sessions remembered at once; the oldest is forgotten past this (a long-running mock
    # serving many short clients that never say goodbye must not grow without bound).
    MAX_SESSIONS = 10_000

    def __init__(self, trace: TracePlan, *, reuse: bool = True) -> None:
        self.reuse = reuse
        by_era: dict[Era | None, dict[bytes, list[RecordedCall]]] = {}
        self._recorded: list[RecordedCall] = []
        self._eras: list[Era] = []  # the eras the recording shows, in order of first appearance
        self._lock = threading.Lock()
        self._cursors: OrderedDict[Any, _Cursor] = OrderedDict()
        for session in trace.sessions:
            era = session.era
            if era is not None and era not in self._eras:
                self._eras.append(era)
            for call in session.calls:
                if call.answer is None:
                    continue
                by_era.setdefault(era, defaultdict(list))[match_key(call.method, call.request.params)].append(call)
                self._recorded.append(call)
        unknown = by_era.pop(None, {})
        self._index: dict[Era | None, dict[bytes, tuple[RecordedCall, ...]]] = {}
        for era in [*self._eras, None]:
            merged = {key: list(calls) for key, calls in by_era.get(era, {}).items()}
            for key, calls in unknown.items():  # a recording whose era is unknown serves every era
                merged.setdefault(key, []).extend(calls)
            self._index[era] = {key: tuple(calls) for key, calls in merged.items()}

    def _cursor(self, session: Any, request: Request) -> _Cursor:
        """The cursor of `session`; a session's first request, `initialize` or `server/discover` starts one."""
        cursor = self._cursors.get(session)
        starts = request.method in CLIENT_DESCRIBING
        if cursor is not None and not starts:
            self._cursors.move_to_end(session)
            return cursor
        wanted = request_era(request.method, request.params)
        if wanted is None:  # a client that does not say: the recording's first era
            era = self._eras[0] if self._eras else None
        else:
            era = wanted
        index = self._index.get(era)
        if index is None and (self._index.get(None) or not self._eras):
            index = self._index[None]  # only sessions of unknown era were recorded: they serve anyone
        cursor = self._cursors[session] = _Cursor(era, index)
        self._cursors.move_to_end(session)
        while len(self._cursors) > self.MAX_SESSIONS:
            self._cursors.popitem(last=False)
        return cursor

    def end(self, session: Any) -> None:
        """Forget a client session (it ended: stdin EOF, `DELETE`, its legacy stream closed)."""
        with self._lock:
            self._cursors.pop(session, None)

    def lookup(self, request: Request, session: Any = None) -> RecordedReply | None:
        key = match_key(request.method, request.params)
        with self._lock:
            cursor = self._cursor(session, request)
            if cursor.index is None:
                return None if request.method == "ping" else RecordedReply({"error": self._wrong_era(cursor.era)})
            calls = cursor.index.get(key)
            if not calls:
                return None
            taken = cursor.taken.get(key, 0)
            if taken < len(calls):
                call = calls[taken]
                cursor.taken[key] = taken + 1
            elif self.reuse:
                call = calls[-1]
            else:
                return None
        answer = jsonrpc.to_obj(call.answer)
        answer.pop("jsonrpc", None)
        answer.pop("id", None)
        token = progress_token(request.params)
        notes = []
        for note in call.notifications:
            params = note.get("params")
            if token is not None and isinstance(params, dict) and "progressToken" in params:
                params = {**params, "progressToken": token}
            notes.append({"method": note["method"], "params": params})
        return RecordedReply(answer, notes, list(call.asks), call.via)

    def _wrong_era(self, era: Era | None) -> dict:
        """The error a client gets when the recording has no session in the era it speaks."""
        wanted = era_title(era, span=True)
        has = " and ".join(era_title(e) for e in self._eras) or "none"
        return {"code": WRONG_ERA, "message": f"mcpbench serve-trace: the recording has no {wanted} session "
                                              f"(it has {has} only); connect in the era it was recorded in"}

    def nearest(self, request: Request) -> RecordedCall | None:
        """The recorded request most like `request`: same method first, then the closest params."""
        same = [call for call in self._recorded if call.method == request.method]
        if not same:
            methods = sorted({call.method for call in self._recorded})
            close = difflib.get_close_matches(request.method, methods, n=1, cutoff=0.0)
            same = [call for call in self._recorded if close and call.method == close[0]]
        if not same:
            return None
        want = match_key(request.method, request.params).decode()
        return max(same, key=lambda call: difflib.SequenceMatcher(
            None, want, match_key(call.method, call.request.params).decode(), autojunk=False).ratio())

    def miss(self, request: Request) -> ErrorResponse:
        """The error an unrecorded request gets."""
        name = call_name(request.method, request.params)
        what = f"{request.method} {name}" if name else request.method
        nearest = self.nearest(request)
        if nearest is None:
            return ErrorResponse(id=request.id, code=NOT_RECORDED,
                                 message=f"mcpbench serve-trace: {what} is not in the recording (it has no requests)")
        params = {k: v for k, v in (nearest.request.params or {}).items() if k != "_meta"}
        shown = orjson.dumps(params).decode()
        if len(shown) > NEAREST_CHARS:
            shown = shown[: NEAREST_CHARS - 1] + "…"
        return ErrorResponse(
            id=request.id, code=NOT_RECORDED,
            message=f"mcpbench serve-trace: {what} with these params is not in the recording; "
                    f"nearest recorded request: {nearest.method} {shown}",
            data={"nearest": {"method": nearest.method, "params": params}},
        )


class _Asker:
    """Server→client requests the mock sends, and the client's answers.

    The mock plays the server here: its requests in flight are the core's one
    table of them, a `Session`'s `pending` (keyed `(S2C, id)`), each with a
    queue as its waiter; the client's answer pairs with it there.
    """

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._session = Session()
        self._lock = threading.Lock()

    def ask(self, send, method: str, params: Any) -> Response | ErrorResponse | None:
        """Send a request to the client; its answer, or None after `ASK_TIMEOUT`."""
        request = Request(id=f"mcpbench-{next(self._ids)}", method=method, params=params, _parsed=True)
        inbox: queue.SimpleQueue = queue.SimpleQueue()
        with self._lock:
            self._session.observe(S2C, request, time.perf_counter())
            self._session.pending[(S2C, request.id)].waiter = inbox
        try:
            send(request)
            return inbox.get(timeout=ASK_TIMEOUT)
        except queue.Empty:
            return None
        finally:
            with self._lock:
                self._session.pending.pop((S2C, request.id), None)

    def answered(self, message: Response | ErrorResponse) -> None:
        with self._lock:
            events = self._session.observe(C2S, message, time.perf_counter())
        for event in events:
            if type(event) is Exchange and event.waiter is not None:
                event.waiter.put(event.answer)


def _messages(reply: RecordedReply, request: Request, asker: _Asker, send) -> None:
    """Send a reply's notifications, then its server requests (each awaited), then the answer."""
    if reply.relay is not None:
        reply.relay(request, send, lambda method, params: asker.ask(send, method, params))
        return
    for note in reply.notifications:
        send(Notification(method=note["method"], params=note["params"], _parsed=True))
    for ask in reply.asks:
        asker.ask(send, ask.method, ask.params)
    send(jsonrpc.from_obj({"jsonrpc": "2.0", "id": request.id, **reply.answer}))


def answer_for(answers: TraceAnswers, request: Request, forward: Forwarder | None = None, session: Any = None) -> RecordedReply:
    """The recorded reply to `request`; when there is none, a live one (`forward`) or an error.

    `session` is the client session's key for `forward`.
    """
    if forward is not None:
        forward.remember(session, request)
    reply = answers.lookup(request, session)
    if reply is None:
        if request.method == "ping":
            return RecordedReply({"result": {}})
        if forward is not None:
            return RecordedReply({}, relay=lambda req, send, ask: forward.forward(session, req, send, ask))
        error = jsonrpc.to_obj(answers.miss(request))
        return RecordedReply({"error": error["error"]})
    return reply


def _final_answer(reply: RecordedReply, request: Request) -> jsonrpc.Message:
    """Just the answer of `reply` (a JSON body has room for nothing else)."""
    if reply.relay is None:
        return jsonrpc.from_obj({"jsonrpc": "2.0", "id": request.id, **reply.answer})
    sent: list[jsonrpc.Message] = []
    reply.relay(request, sent.append, lambda method, params: None)
    return sent[-1]


# ---- stdio ------------------------------------------------------------------------------------


def serve_stdio(answers: TraceAnswers, stdin: int = 0, stdout: int = 1, *, forward: Forwarder | None = None) -> None:
    """Answer newline-delimited JSON-RPC on `stdin` until EOF. Each request runs on its own thread."""
    lock = threading.Lock()
    asker = _Asker()
    threads: list[threading.Thread] = []

    def send(message: jsonrpc.Message) -> None:
        data = jsonrpc.encode(message) + b"\n"
        with lock:
            write_all(stdout, data)

    def handle(request: Request) -> None:
        try:
            _messages(answer_for(answers, request, forward, STDIO_SESSION), request, asker, send)
        except OSError:
            pass  # the client went away

    if forward is not None:
        forward.attach(STDIO_SESSION, send)
    framer = LineFramer()
    while True:
        try:
            chunk = os.read(stdin, READ_SIZE)
        except OSError:
            chunk = b""
        for event in framer.feed(chunk):
            if not isinstance(event, Line) or not event.data.strip():
                continue
            try:
                message = jsonrpc.decode(event.data)
            except jsonrpc.InvalidMessage as exc:
                send(ErrorResponse(id=None, code=jsonrpc.PARSE_ERROR, message=f"mcpbench serve-trace: {exc.reason}"))
                continue
            if isinstance(message, Request):
                thread = threading.Thread(target=handle, args=(message,), daemon=True)
                thread.start()
                threads.append(thread)
            elif isinstance(message, (Response, ErrorResponse)):
                asker.answered(message)
        if not chunk:
            break
    for thread in threads:
        thread.join(ASK_TIMEOUT)
    if forward is not None:
        forward.close()


# ---- HTTP -------------------------------------------------------------------------------------


def _sse(message: jsonrpc.Message) -> bytes:
    return sse_encode(SseEvent(event="message", data=jsonrpc.encode(message).decode()), eol=b"\r\n")


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "MockHttpServer"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def _body(self) -> bytes | None:
        """The request body; None (after a 400 answer) when its Content-Length is not a length."""
        text = (self.headers.get("content-length") or "0").strip()
        if not text.isdigit():
            self._reply(400, b"Content-Length must be a number of bytes", "text/plain")
            self.close_connection = True
            return None
        length = int(text)
        return self.rfile.read(length) if length else b""

    def _reply(self, status: int, body: bytes = b"", content_type: str | None = None, headers: dict | None = None) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("content-type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self.server.transport == "sse" and urlsplit(self.path).path == self.server.sse_path:
            self._legacy_stream()
            return
        if self.server.transport == "streamable-http" and self.server.forward is not None:
            # Only a forwarded live session has anything to send outside calls.
            if not (sid := self.headers.get(mcphttp.SESSION_ID)):
                self._reply(400, b"Mcp-Session-Id required", "text/plain")
                return
            self._open_stream("text/event-stream", {"cache-control": "no-cache, no-transform", mcphttp.SESSION_ID: sid})
            self._stream_out(sid)
            return
        self._reply(405, b"", headers={"allow": "POST, DELETE"})

    def _open_stream(self, content_type: str, headers: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("content-type", content_type)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

    def _stream_out(self, sid: str, first: bytes = b"") -> None:
        """Write `first`, then what reaches the session's outbox, as SSE until the stream or the server ends."""
        outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.server.streams[sid] = outbox
        forward = self.server.forward
        if forward is not None:
            forward.attach(sid, outbox.put)
        try:
            if first:
                self.wfile.write(first)
                self.wfile.flush()
            while not self.server.stopping.is_set():
                try:
                    item = outbox.get(timeout=0.5)
                except queue.Empty:
                    continue
                if item is None:
                    break
                self.wfile.write(_sse(item))
                self.wfile.flush()
        except OSError:
            pass
        finally:
            if self.server.streams.get(sid) is outbox:
                del self.server.streams[sid]
            if forward is not None:
                forward.detach(sid, outbox.put)

    def do_DELETE(self) -> None:  # noqa: N802
        if sid := self.headers.get(mcphttp.SESSION_ID):
            self.server.answers.end(sid)
            if self.server.forward is not None:
                self.server.forward.end(sid)
        self._reply(200 if self.server.transport == "streamable-http" else 405)

    def do_POST(self) -> None:  # noqa: N802
        body = self._body()
        if body is None:
            return
        try:
            message = jsonrpc.decode(body)
        except jsonrpc.InvalidMessage as exc:
            error = ErrorResponse(id=None, code=jsonrpc.PARSE_ERROR, message=f"mcpbench serve-trace: {exc.reason}")
            self._reply(400, jsonrpc.encode(error), mcphttp.JSON)
            return
        if self.server.transport == "sse":
            self._legacy_post(message)
            return
        if not isinstance(message, Request):
            if isinstance(message, (Response, ErrorResponse)):
                self.server.asker.answered(message)
            self._reply(202)
            return
        sid = uuid.uuid4().hex if message.method == "initialize" else self.headers.get(mcphttp.SESSION_ID)
        reply = answer_for(self.server.answers, message, self.server.forward, sid)
        headers = {}
        if sid is not None and (message.method != "initialize" or "result" in reply.answer or reply.relay):
            headers[mcphttp.SESSION_ID] = sid
        if reply.via == "json" or self.server.json_response:
            answer = _final_answer(reply, message)
            self._reply(200, jsonrpc.encode(answer), mcphttp.JSON, headers)
            return
        # SSE: stream the notifications, server requests and answer, then close.
        self.send_response(200)
        self.send_header("content-type", mcphttp.EVENT_STREAM)
        self.send_header("cache-control", "no-cache, no-transform")
        self.send_header("x-accel-buffering", "no")
        self.send_header("connection", "close")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True

        def send(msg: jsonrpc.Message) -> None:
            self.wfile.write(_sse(msg))
            self.wfile.flush()

        try:
            _messages(reply, message, self.server.asker, send)
        except OSError:
            pass

    # legacy HTTP+SSE

    def _legacy_stream(self) -> None:
        sid = uuid.uuid4().hex
        self._open_stream("text/event-stream; charset=utf-8", {"cache-control": "no-store"})
        endpoint = f"{self.server.messages_path}?session_id={sid}"
        try:
            self._stream_out(sid, sse_encode(SseEvent(event="endpoint", data=endpoint), eol=b"\r\n"))
        finally:
            self.server.answers.end(sid)  # a legacy session lasts as long as its stream
            if self.server.forward is not None:
                self.server.forward.end(sid)

    def _legacy_post(self, message: jsonrpc.Message) -> None:
        sid = (parse_qs(urlsplit(self.path).query).get("session_id") or [None])[0]
        outbox = self.server.streams.get(sid)
        if outbox is None:
            self._reply(404, b"Could not find session", "text/plain")
            return
        self._reply(202, b"Accepted", "text/plain")
        if isinstance(message, Request):
            threading.Thread(
                target=_messages,
                args=(answer_for(self.server.answers, message, self.server.forward, sid), message,
                      self.server.asker, outbox.put),
                daemon=True,
            ).start()
        elif isinstance(message, (Response, ErrorResponse)):
            self.server.asker.answered(message)


class MockHttpServer(http.server.ThreadingHTTPServer):
    """A Streamable HTTP or legacy HTTP+SSE server answering from `answers`."""

    daemon_threads = True

    def __init__(self, answers: TraceAnswers, *, transport: str, host: str = "127.0.0.1", port: int = 0,
                 json_response: bool = False, forward: Forwarder | None = None) -> None:
        super().__init__((host, port), _Handler)
        self.answers = answers
        self.forward = forward
        self.transport = transport
        self.json_response = json_response
        self.asker = _Asker()
        self.streams: dict[str, queue.SimpleQueue] = {}
        self.stopping = threading.Event()
        self.sse_path, self.messages_path = "/sse", "/messages/"

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        path = "/sse" if self.transport == "sse" else "/mcp"
        return f"http://{host}:{port}{path}"

    def shutdown(self) -> None:
        self.stopping.set()
        for outbox in list(self.streams.values()):
            outbox.put(None)
        super().shutdown()


def serve(trace: TracePlan, transport: str, *, host: str = "127.0.0.1", port: int = 8000,
          json_response: bool = False, forward: Forwarder | None = None) -> None:
    """Serve `trace` on `transport` until interrupted (stdio: until stdin closes).

    With `forward`, unrecorded requests are answered by its live server.
    """
    answers = TraceAnswers(trace)
    if transport == "stdio":
        try:
            serve_stdio(answers, forward=forward)
        finally:  # also on Ctrl-C or SIGTERM: the live upstream (a child process, say) is stopped
            if forward is not None:
                forward.close()
        return
    try:
        server = MockHttpServer(answers, transport=transport, host=host, port=port, json_response=json_response,
                                forward=forward)
    except OSError as exc:
        raise bind_error(host, port, exc) from None
    print(f"mcpbench: serving {trace.path} ({transport}) on {server.url}", file=sys.stderr, flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.stopping.set()
        server.server_close()
        if forward is not None:
            forward.close()
